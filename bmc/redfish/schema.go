package redfish

// The resources and properties used, with their DMTF schema names. Only the
// properties the client reads or writes are declared; Redfish services
// send many more, which decoding ignores.

// ODataID is a reference to a resource: {"@odata.id": "/redfish/v1/…"}.
type ODataID struct {
	ODataID string `json:"@odata.id"`
}

// Collection is a resource collection (e.g. VirtualMediaCollection).
type Collection struct {
	ODataID string    `json:"@odata.id,omitempty"`
	Name    string    `json:"Name,omitempty"`
	Members []ODataID `json:"Members"`
	Count   int       `json:"Members@odata.count"`
}

// ServiceRoot is /redfish/v1 (ServiceRoot.v1).
type ServiceRoot struct {
	ODataID        string   `json:"@odata.id,omitempty"`
	ID             string   `json:"Id,omitempty"`
	Name           string   `json:"Name,omitempty"`
	RedfishVersion string   `json:"RedfishVersion,omitempty"`
	UUID           string   `json:"UUID,omitempty"`
	Systems        *ODataID `json:"Systems,omitempty"`
	Managers       *ODataID `json:"Managers,omitempty"`
	SessionService *ODataID `json:"SessionService,omitempty"`
	Links          struct {
		Sessions *ODataID `json:"Sessions,omitempty"`
	} `json:"Links"`
}

// PowerState is a ComputerSystem's PowerState (Resource.PowerState).
type PowerState string

// PowerState values.
const (
	PowerStateOn          PowerState = "On"
	PowerStateOff         PowerState = "Off"
	PowerStatePoweringOn  PowerState = "PoweringOn"
	PowerStatePoweringOff PowerState = "PoweringOff"
	PowerStatePaused      PowerState = "Paused"
)

// ResetType is the ResetType parameter of ComputerSystem.Reset
// (Resource.ResetType).
type ResetType string

// ResetType values used here.
const (
	ResetOn               ResetType = "On"
	ResetForceOff         ResetType = "ForceOff"
	ResetGracefulShutdown ResetType = "GracefulShutdown"
	ResetGracefulRestart  ResetType = "GracefulRestart"
	ResetForceRestart     ResetType = "ForceRestart"
	ResetForceOn          ResetType = "ForceOn"
	ResetPowerCycle       ResetType = "PowerCycle"
	ResetNmi              ResetType = "Nmi"
)

// BootSource is a BootSourceOverrideTarget value (ComputerSystem.BootSource).
type BootSource string

// BootSource values used here.
const (
	BootSourceNone     BootSource = "None"
	BootSourcePxe      BootSource = "Pxe"
	BootSourceCd       BootSource = "Cd"
	BootSourceUsb      BootSource = "Usb"
	BootSourceHdd      BootSource = "Hdd"
	BootSourceUefiHTTP BootSource = "UefiHttp"
)

// BootSourceOverrideEnabled says how long a boot override holds.
type BootSourceOverrideEnabled string

// BootSourceOverrideEnabled values.
const (
	BootOverrideDisabled   BootSourceOverrideEnabled = "Disabled"
	BootOverrideOnce       BootSourceOverrideEnabled = "Once"
	BootOverrideContinuous BootSourceOverrideEnabled = "Continuous"
)

// Boot is a ComputerSystem's Boot property (ComputerSystem.Boot).
type Boot struct {
	BootSourceOverrideTarget  BootSource                `json:"BootSourceOverrideTarget,omitempty"`
	BootSourceOverrideEnabled BootSourceOverrideEnabled `json:"BootSourceOverrideEnabled,omitempty"`
	// BootSourceOverrideMode is "Legacy" or "UEFI" (left as the BMC has it).
	BootSourceOverrideMode string `json:"BootSourceOverrideMode,omitempty"`
	// AllowableTargets is BootSourceOverrideTarget@Redfish.AllowableValues;
	// empty when the BMC does not say.
	AllowableTargets []BootSource `json:"BootSourceOverrideTarget@Redfish.AllowableValues,omitempty"`
}

// Action is an action's target, with the allowable values of its parameter
// when the BMC lists them.
type Action struct {
	Target string `json:"target"`
	// AllowableResetTypes is ResetType@Redfish.AllowableValues (Reset only).
	AllowableResetTypes []ResetType `json:"ResetType@Redfish.AllowableValues,omitempty"`
}

// ComputerSystem is a server (ComputerSystem.v1).
type ComputerSystem struct {
	ODataID    string     `json:"@odata.id"`
	ODataEtag  string     `json:"@odata.etag,omitempty"`
	ID         string     `json:"Id"`
	Name       string     `json:"Name,omitempty"`
	UUID       string     `json:"UUID,omitempty"`
	PowerState PowerState `json:"PowerState,omitempty"`
	Boot       Boot       `json:"Boot"`
	// VirtualMedia is the system's own VirtualMediaCollection, which newer
	// ComputerSystem versions have; older services have it only under the
	// Manager.
	VirtualMedia *ODataID `json:"VirtualMedia,omitempty"`
	Links        struct {
		ManagedBy []ODataID `json:"ManagedBy,omitempty"`
	} `json:"Links"`
	Actions struct {
		Reset *Action `json:"#ComputerSystem.Reset,omitempty"`
	} `json:"Actions"`

	// ETag is the HTTP ETag of the GET that read the resource (or its
	// @odata.etag), for If-Match on PATCH.
	ETag string `json:"-"`
}

// Manager is a management controller (Manager.v1).
type Manager struct {
	ODataID      string   `json:"@odata.id"`
	ID           string   `json:"Id"`
	Name         string   `json:"Name,omitempty"`
	ManagerType  string   `json:"ManagerType,omitempty"`
	VirtualMedia *ODataID `json:"VirtualMedia,omitempty"`
}

// MediaType is one of a VirtualMedia's MediaTypes.
type MediaType string

// MediaType values.
const (
	MediaTypeCD       MediaType = "CD"
	MediaTypeDVD      MediaType = "DVD"
	MediaTypeFloppy   MediaType = "Floppy"
	MediaTypeUSBStick MediaType = "USBStick"
)

// VirtualMedia is one virtual drive (VirtualMedia.v1).
type VirtualMedia struct {
	ODataID        string      `json:"@odata.id"`
	ID             string      `json:"Id"`
	Name           string      `json:"Name,omitempty"`
	Image          string      `json:"Image,omitempty"`
	ImageName      string      `json:"ImageName,omitempty"`
	Inserted       bool        `json:"Inserted"`
	WriteProtected bool        `json:"WriteProtected"`
	MediaTypes     []MediaType `json:"MediaTypes,omitempty"`
	ConnectedVia   string      `json:"ConnectedVia,omitempty"`
	Actions        struct {
		InsertMedia *Action `json:"#VirtualMedia.InsertMedia,omitempty"`
		EjectMedia  *Action `json:"#VirtualMedia.EjectMedia,omitempty"`
	} `json:"Actions"`
}

// HasMediaType says whether m can hold media of type t.
func (m *VirtualMedia) HasMediaType(t MediaType) bool {
	for _, have := range m.MediaTypes {
		if have == t {
			return true
		}
	}
	return false
}

// InsertMediaRequest is the body of VirtualMedia.InsertMedia.
type InsertMediaRequest struct {
	Image          string `json:"Image"`
	Inserted       *bool  `json:"Inserted,omitempty"`
	WriteProtected *bool  `json:"WriteProtected,omitempty"`
	// TransferProtocolType is e.g. "HTTP" or "HTTPS"; empty lets the BMC
	// take it from Image.
	TransferProtocolType string `json:"TransferProtocolType,omitempty"`
}

// ResetRequest is the body of ComputerSystem.Reset.
type ResetRequest struct {
	ResetType ResetType `json:"ResetType"`
}

// SessionRequest is the body that creates a Session (Session.v1).
type SessionRequest struct {
	UserName string `json:"UserName"`
	Password string `json:"Password"`
}

// Message is one entry of @Message.ExtendedInfo (Message.v1).
type Message struct {
	MessageID       string `json:"MessageId,omitempty"`
	Message         string `json:"Message,omitempty"`
	Severity        string `json:"Severity,omitempty"`
	MessageSeverity string `json:"MessageSeverity,omitempty"`
	Resolution      string `json:"Resolution,omitempty"`
}

// ErrorResponse is the body of a Redfish error response.
type ErrorResponse struct {
	Error struct {
		Code         string    `json:"code"`
		Message      string    `json:"message"`
		ExtendedInfo []Message `json:"@Message.ExtendedInfo,omitempty"`
	} `json:"error"`
}
