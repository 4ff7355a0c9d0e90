package hostnet_test

import "net"

type net_IPNet = net.IPNet

var netip_ParseCIDR = net.ParseCIDR
