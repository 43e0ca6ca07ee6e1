package settings

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/rollout"
)

// Where settings come from (Status.Source).
const (
	FromFlags     = "flags"
	FromConfigMap = "configmap"
)

// Observer receives what a Source decides, for metrics.
type Observer interface {
	// SettingsInUse reports the settings now sent: their hash and source.
	SettingsInUse(hash, source string)
	// SettingsRejected counts a ConfigMap that could not be used.
	SettingsRejected()
	// AgentSettingsDiffer counts an agent that connected programming
	// settings with another hash than this replica's.
	AgentSettingsDiffer()
}

// Config configures a Source.
type Config struct {
	// Flags are the replica's own settings: what it sends without a
	// ConfigMap, and the values of the fields a ConfigMap leaves out.
	Flags nodeview.Defaults
	// Namespace and Name locate the ConfigMap; an empty Name reads none.
	Namespace, Name string
	// Observer may be nil.
	Observer Observer
	// Clock defaults to the real clock.
	Clock  clock.PassiveClock
	Logger *slog.Logger
}

// Input is the watched ConfigMap as the watch loop saw it.
type Input struct {
	// Exists is false when there is no such ConfigMap.
	Exists          bool
	ResourceVersion string
	Data            map[string]string
	// Progress is the ConfigMap's rollout.ProgressAnnotation.
	Progress string
}

// Status is where a replica's settings come from.
type Status struct {
	// Hash is nodeview's settings hash of the settings in use.
	Hash string
	// Source is FromFlags or FromConfigMap.
	Source string
	// ConfigMap is "namespace/name", empty when none is watched.
	ConfigMap string
	// ResourceVersion of the ConfigMap the settings were read from.
	ResourceVersion string
	// Error is why the ConfigMap is not used, and ErrorSince since when;
	// empty while it is.
	Error      string
	ErrorSince time.Time
}

// Source resolves the settings one replica sends.
type Source struct {
	cfg Config
	// current are the settings in use: the flags, or the last ConfigMap
	// that parsed. Only Resolve's goroutine touches it.
	current nodeview.Defaults
	// rollout is the rollout of the ConfigMap in use, and progress and
	// resourceVersion where it stands; only Resolve's goroutine touches
	// them.
	rollout         *rollout.Spec
	progress        rollout.Progress
	resourceVersion string

	mu     sync.Mutex
	status Status
	// nodeHash gives the settings hash a node is sent (a Node label or a
	// rollout may give it its own); nil: the cluster's, status.Hash.
	nodeHash func(node string) (string, bool)
}

// New returns a Source that sends the flags until Resolve says otherwise.
func New(cfg Config) *Source {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	s := &Source{cfg: cfg, current: cfg.Flags, status: Status{Source: FromFlags}}
	if cfg.Name != "" {
		s.status.ConfigMap = cfg.Namespace + "/" + cfg.Name
	}
	return s
}

// ConfigMap returns the namespace and name of the ConfigMap to watch;
// ok is false when none is.
func (s *Source) ConfigMap() (namespace, name string, ok bool) {
	return s.cfg.Namespace, s.cfg.Name, s.cfg.Name != ""
}

// Resolve decides the settings from the ConfigMap as in: the flags when
// it does not exist, the flags with its fields over them when it parses,
// and the settings in use when it does not (the error is reported in
// Status, logged and counted). It returns the settings to send now.
func (s *Source) Resolve(in Input) nodeview.Defaults {
	switch {
	case !in.Exists:
		s.current, s.rollout, s.progress, s.resourceVersion = s.cfg.Flags, nil, rollout.Progress{}, ""
		s.update(func(st *Status) {
			st.Source, st.ResourceVersion, st.Error, st.ErrorSince = FromFlags, "", "", time.Time{}
		})
	default:
		d, spec, err := s.parse(in)
		if err != nil {
			s.cfg.Logger.Error("NodeConfig settings ConfigMap rejected: keeping the settings in use",
				"configMap", s.status.ConfigMap, "resourceVersion", in.ResourceVersion, "err", err)
			s.cfg.Observer.SettingsRejected()
			now := s.cfg.Clock.Now()
			s.update(func(st *Status) {
				if st.Error == "" {
					st.ErrorSince = now
				}
				st.Error = err.Error()
			})
			return s.current
		}
		s.current, s.rollout = d, spec
		s.progress, s.resourceVersion = rollout.ParseProgress(in.Progress), in.ResourceVersion
		s.update(func(st *Status) {
			st.Source, st.ResourceVersion, st.Error, st.ErrorSince = FromConfigMap, in.ResourceVersion, "", time.Time{}
		})
	}
	return s.current
}

func (s *Source) parse(in Input) (nodeview.Defaults, *rollout.Spec, error) {
	data, ok := in.Data[Key]
	if !ok {
		return s.current, nil, fmt.Errorf("no %s key", Key)
	}
	return ParseFile([]byte(data), s.cfg.Flags)
}

// Rollout returns the rollout of the settings in use (nil when none),
// where the ConfigMap says it stands, and the ConfigMap's
// resourceVersion. Only Resolve's goroutine may call it.
func (s *Source) Rollout() (*rollout.Spec, rollout.Progress, string) {
	return s.rollout, s.progress, s.resourceVersion
}

// InUse records the hash of the settings now sent (from the Index built
// with them) and reports it when it or the source changed.
func (s *Source) InUse(hash string) {
	var st Status
	changed := false
	s.update(func(cur *Status) {
		changed = cur.Hash != hash
		cur.Hash = hash
		st = *cur
	})
	if changed {
		s.cfg.Logger.Info("NodeConfig settings in use", "settingsHash", st.Hash, "source", st.Source,
			"configMap", st.ConfigMap, "resourceVersion", st.ResourceVersion)
	}
	s.cfg.Observer.SettingsInUse(st.Hash, st.Source)
}

// NodesInUse hands the Source the settings hash each node is sent, for
// CheckAgent; the function must be safe to call from any goroutine.
func (s *Source) NodesInUse(nodeHash func(node string) (string, bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodeHash = nodeHash
}

func (s *Source) update(f func(*Status)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.status)
}

// Status returns where the settings come from now.
func (s *Source) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// CheckAgent compares the settings hash an agent reports programming
// when its stream opens with this replica's: a different one means the
// agent was last configured with other settings, by a replica that
// disagrees with this one or before they changed. It logs and counts
// that, and reports whether they differ. An empty hash (no NodeConfig
// yet, or an older agent) is not checked.
func (s *Source) CheckAgent(node, agentHash string) bool {
	s.mu.Lock()
	st, nodeHash := s.status, s.nodeHash
	s.mu.Unlock()
	want := st.Hash
	if nodeHash != nil {
		want, _ = nodeHash(node)
	}
	if agentHash == "" || want == "" || agentHash == want {
		return false
	}
	s.cfg.Logger.Warn("agent programs NodeConfig settings other than this replica's: another replica may have other settings "+
		"(see each replica's ListNodes settings), or they changed while it was away; it now gets this replica's",
		"node", node, "agentSettingsHash", agentHash, "settingsHash", want, "source", st.Source)
	s.cfg.Observer.AgentSettingsDiffer()
	return true
}

// ParseRef reads a --config-map value: "namespace/name", or "name" in
// namespace podNamespace (the pod's own, POD_NAMESPACE). Empty is no
// ConfigMap.
func ParseRef(ref, podNamespace string) (namespace, name string, err error) {
	if ref == "" {
		return "", "", nil
	}
	namespace, name, found := strings.Cut(ref, "/")
	if !found {
		namespace, name = podNamespace, ref
		if namespace == "" {
			return "", "", fmt.Errorf("%q names no namespace and POD_NAMESPACE is not set: want namespace/name", ref)
		}
	}
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return "", "", fmt.Errorf("%q: namespace %q: %s", ref, namespace, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", "", fmt.Errorf("%q: name %q: %s", ref, name, strings.Join(msgs, "; "))
	}
	return namespace, name, nil
}

type nopObserver struct{}

func (nopObserver) SettingsInUse(string, string) {}
func (nopObserver) SettingsRejected()            {}
func (nopObserver) AgentSettingsDiffer()         {}
