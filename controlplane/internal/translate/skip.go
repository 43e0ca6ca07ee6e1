package translate

import (
	"errors"
	"fmt"
)

// Kind is the kind of API object a translation deals with.
type Kind string

// Kinds of objects translated.
const (
	KindService       Kind = "Service"
	KindEndpointSlice Kind = "EndpointSlice"
	KindNode          Kind = "Node"
	KindServiceCIDR   Kind = "ServiceCIDR"
)

// Reason says why an object was skipped or part of it dropped or clamped.
// Values are stable: they become metric labels.
type Reason string

// Reasons a whole object is skipped.
const (
	ReasonNilObject          Reason = "NilObject"
	ReasonInvalidName        Reason = "InvalidName"
	ReasonHeadless           Reason = "Headless"
	ReasonExternalName       Reason = "ExternalName"
	ReasonOtherProxy         Reason = "OtherProxy"
	ReasonUnsupportedType    Reason = "UnsupportedType"
	ReasonNoClusterIP        Reason = "NoClusterIP"
	ReasonMissingServiceName Reason = "MissingServiceName"
	ReasonFQDNAddressType    Reason = "FQDNAddressType"
	ReasonUnknownAddressType Reason = "UnknownAddressType"
)

// Reasons part of an object is dropped, replaced by its default, or clamped.
const (
	ReasonInvalidIP                  Reason = "InvalidIP"
	ReasonDuplicateAddress           Reason = "DuplicateAddress"
	ReasonExtraClusterIP             Reason = "ExtraClusterIP"
	ReasonFamilyNotServed            Reason = "FamilyNotServed"
	ReasonProxyModeIngress           Reason = "ProxyModeIngress"
	ReasonInvalidSourceRange         Reason = "InvalidSourceRange"
	ReasonInvalidCIDR                Reason = "InvalidCIDR"
	ReasonFieldNotApplicable         Reason = "FieldNotApplicable"
	ReasonUnsupportedProtocol        Reason = "UnsupportedProtocol"
	ReasonInvalidPort                Reason = "InvalidPort"
	ReasonInvalidPortName            Reason = "InvalidPortName"
	ReasonInvalidNodePort            Reason = "InvalidNodePort"
	ReasonDuplicatePort              Reason = "DuplicatePort"
	ReasonDuplicateNodePort          Reason = "DuplicateNodePort"
	ReasonTooManyPorts               Reason = "TooManyPorts"
	ReasonInvalidAffinity            Reason = "InvalidAffinity"
	ReasonInvalidTrafficPolicy       Reason = "InvalidTrafficPolicy"
	ReasonUnknownTrafficDistribution Reason = "UnknownTrafficDistribution"
	ReasonUnknownLoadBalancing       Reason = "UnknownLoadBalancing"
	ReasonInvalidHealthCheckNodePort Reason = "InvalidHealthCheckNodePort"
	ReasonNoAddress                  Reason = "NoAddress"
	ReasonWrongFamily                Reason = "WrongFamily"
	ReasonDuplicateEndpoint          Reason = "DuplicateEndpoint"
	ReasonTooManyEndpoints           Reason = "TooManyEndpoints"
	ReasonInvalidTriggerTime         Reason = "InvalidTriggerTime"
)

// SkipError reports that an object was not translated at all. It is the
// only error the translators return.
type SkipError struct {
	Kind      Kind
	Namespace string
	Name      string
	Reason    Reason
	// Detail is a human-readable explanation; it never becomes a label.
	Detail string
}

// Error implements error.
func (e *SkipError) Error() string {
	msg := fmt.Sprintf("skipping %s %q: %s", e.Kind, e.object(), e.Reason)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *SkipError) object() string {
	if e.Namespace == "" {
		return e.Name
	}
	return e.Namespace + "/" + e.Name
}

// IsSkip reports whether err is, or wraps, a *SkipError.
func IsSkip(err error) bool {
	var skip *SkipError
	return errors.As(err, &skip)
}

// SkipReason returns the reason of the *SkipError err is or wraps, and
// false when it is none.
func SkipReason(err error) (Reason, bool) {
	var skip *SkipError
	if !errors.As(err, &skip) {
		return "", false
	}
	return skip.Reason, true
}
