// Package media serves enrollment ISOs to BMCs as virtual media: the
// short-lived download tokens that let a BMC fetch one Server's image
// (token.go) and the HTTP handler that checks them (handler.go).
package media
