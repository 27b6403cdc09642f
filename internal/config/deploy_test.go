package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The shipped deployment examples must stay loadable: their settings and
// environment variable names are checked against this package.

func knownEnv(name string) bool {
	if name == EnvConfig || name == EnvAuthKey {
		return true
	}
	for _, s := range Settings() {
		if s.Env == name {
			return true
		}
	}
	return false
}

func TestDockerComposeEnvironment(t *testing.T) {
	b, err := os.ReadFile("../../deploy/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	env := compose.Services["grasp-sync"].Environment
	if len(env) == 0 {
		t.Fatal("no grasp-sync service environment")
	}
	for k, v := range env {
		if !knownEnv(k) {
			t.Errorf("unknown variable %s", k)
		}
		// ${GRASP_DOMAIN:-git.example.com} → its default.
		if i := strings.Index(v, ":-"); strings.HasPrefix(v, "${") && i > 0 {
			env[k] = strings.TrimSuffix(v[i+2:], "}")
		}
	}
	// Commented-out variables must be known too.
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if name, _, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(name, EnvPrefix) && !knownEnv(name) {
			t.Errorf("unknown variable %s in a comment", name)
		}
	}
	cfg := Default()
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := ApplyEnv(cfg, lookup); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("compose configuration invalid: %v", err)
	}
	if cfg.GitDir != "/srv/git" || len(cfg.BootstrapRelays) != 2 {
		t.Errorf("unexpected compose configuration: %+v", cfg)
	}
}

func TestKubernetesConfigMap(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(strings.NewReader(cm.Data["grasp-sync.yml"]))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("ConfigMap configuration invalid: %v", err)
	}
	strfry, err := os.ReadFile("../../deploy/strfry.conf")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["strfry.conf"] != string(strfry) {
		t.Error("ConfigMap strfry.conf differs from deploy/strfry.conf")
	}

	d, err := os.ReadFile("../../deploy/kubernetes/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(d), "\n") {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "- name: "); ok && strings.HasPrefix(name, EnvPrefix) && !knownEnv(name) {
			t.Errorf("deployment.yaml: unknown variable %s", name)
		}
	}
}

// composeFile is the part of deploy/docker-compose.yml the tests read.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Entrypoint  []string          `yaml:"entrypoint"`
		DependsOn   map[string]any    `yaml:"depends_on"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		Environment map[string]string `yaml:"environment"`
	} `yaml:"services"`
}

// pluginPath is where deploy/strfry.conf runs its write-policy plugin.
const pluginPath = "/plugin/grasp-sync-strfry-policy"

// strfryPlugin returns relay.writePolicy.plugin of deploy/strfry.conf.
func strfryPlugin(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/strfry.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "plugin = "); ok {
			return strings.Trim(v, `"`)
		}
	}
	t.Fatal("deploy/strfry.conf sets no writePolicy plugin")
	return ""
}

// checkPluginScript checks a script installing the plugin: it copies the
// image's binary into /plugin and writes the wrapper strfry.conf names,
// which runs `grasp-sync strfry-policy`.
func checkPluginScript(t *testing.T, where string, script string) {
	t.Helper()
	for _, want := range []string{"cp /usr/local/bin/grasp-sync /plugin/", "mv -f /plugin/.wrapper.new " + pluginPath, "exec /plugin/grasp-sync strfry-policy"} {
		if !strings.Contains(script, want) {
			t.Errorf("%s: the plugin script lacks %q:\n%s", where, want, script)
		}
	}
}

// mountsVolume tells whether one of the compose volume entries
// ("name:/path[:ro]") mounts a named volume at path.
func mountsVolume(vols []string, path string) bool {
	for _, v := range vols {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == path && !strings.HasPrefix(parts[0], ".") && !strings.HasPrefix(parts[0], "/") {
			return true
		}
	}
	return false
}

// pinned reports whether an image reference names a tag other than latest,
// or a digest.
func pinned(image string) bool {
	if strings.Contains(image, "@sha256:") {
		return true
	}
	i := strings.LastIndex(image, ":")
	return i > strings.LastIndex(image, "/") && image[i+1:] != "latest"
}

func TestDockerComposeDeploy(t *testing.T) {
	b, err := os.ReadFile("../../deploy/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for name, s := range c.Services {
		if !pinned(s.Image) {
			t.Errorf("service %s: image %q is not pinned to a tag", name, s.Image)
		}
		if s.Image == "grasp-sync:local" && s.Build == nil {
			t.Errorf("service %s: grasp-sync:local is not built here", name)
		}
		// Published ports listen on loopback only: a TLS proxy in front
		// publishes the relay and the clones; 9090 serves /status and
		// /metrics.
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s: port %q is not bound to 127.0.0.1", name, p)
			}
		}
	}
	// Nothing else creates repositories on the git volume, so without
	// create_missing_repos every state and PR event expires in purgatory.
	env := c.Services["grasp-sync"].Environment
	cfg := Default()
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := ApplyEnv(cfg, lookup); err != nil {
		t.Fatal(err)
	}
	if cfg.GitDir == "" || !cfg.Purgatory.CreateMissingRepos {
		t.Errorf("compose: git_dir %q with create_missing_repos %v: nothing creates repositories on the volume", cfg.GitDir, cfg.Purgatory.CreateMissingRepos)
	}
	// The clones are served from the git volume, and the git server's port
	// is published (on loopback).
	if port := listenPort(cfg.GitHTTP.Listen); port == "" || !slices.Contains(c.Services["grasp-sync"].Ports, "127.0.0.1:"+port+":"+port) {
		t.Errorf("compose: git_http.listen %q is not set or its port not published (%v)", cfg.GitHTTP.Listen, c.Services["grasp-sync"].Ports)
	}
	if !mountsVolume(c.Services["grasp-sync"].Volumes, cfg.GitDir) {
		t.Errorf("compose: git_dir %q is not on a volume", cfg.GitDir)
	}
	// The sync state lives on a volume of its own.
	if cfg.State.Dir == "" || !mountsVolume(c.Services["grasp-sync"].Volumes, cfg.State.Dir) {
		t.Errorf("compose: state.dir %q is not on a volume (%v)", cfg.State.Dir, c.Services["grasp-sync"].Volumes)
	}
	// The relay's write policy is grasp-sync's plugin, from the
	// plugin-init service, configured like grasp-sync itself.
	if got := strfryPlugin(t); got != pluginPath {
		t.Errorf("deploy/strfry.conf: writePolicy plugin %q, want %q", got, pluginPath)
	}
	relay, initSvc := c.Services["relay"], c.Services["plugin-init"]
	if _, ok := relay.DependsOn["plugin-init"]; !ok {
		t.Error("compose: the relay does not wait for plugin-init")
	}
	if !mountsVolume(relay.Volumes, "/plugin") || !mountsVolume(initSvc.Volumes, "/plugin") {
		t.Errorf("compose: the plugin volume is not mounted at /plugin in relay (%v) and plugin-init (%v)", relay.Volumes, initSvc.Volumes)
	}
	if initSvc.Image != c.Services["grasp-sync"].Image || len(initSvc.Entrypoint) != 3 {
		t.Fatalf("compose: plugin-init runs %q %v, want grasp-sync's image and sh -ec SCRIPT", initSvc.Image, initSvc.Entrypoint)
	}
	checkPluginScript(t, "compose plugin-init", initSvc.Entrypoint[2])
	for k := range relay.Environment {
		if !knownEnv(k) {
			t.Errorf("compose: relay: unknown variable %s", k)
		}
	}
	if relay.Environment["GRASP_SYNC_SERVICE_DOMAIN"] != env["GRASP_SYNC_SERVICE_DOMAIN"] {
		t.Errorf("compose: the plugin's service domain %q is not grasp-sync's %q",
			relay.Environment["GRASP_SYNC_SERVICE_DOMAIN"], env["GRASP_SYNC_SERVICE_DOMAIN"])
	}
	penv := map[string]string{}
	for k, v := range relay.Environment {
		// ${GRASP_DOMAIN:-git.example.com} → its default.
		if i := strings.Index(v, ":-"); strings.HasPrefix(v, "${") && i > 0 {
			v = strings.TrimSuffix(v[i+2:], "}")
		}
		penv[k] = v
	}
	pcfg := Default()
	plookup := func(k string) (string, bool) { v, ok := penv[k]; return v, ok }
	if err := ApplyEnv(pcfg, plookup); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(pcfg.Validate(), pcfg.ValidateStrfryPolicy()); err != nil {
		t.Errorf("compose: the plugin's configuration is invalid: %v", err)
	}
	// Where an operator reads, the relay's write policy is named.
	for _, f := range []string{"../../deploy/docker-compose.yml", "../../README.md", "../../deploy/kubernetes/kustomization.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(b); !strings.Contains(s, "writePolicy") || !strings.Contains(s, "strfry-policy") {
			t.Errorf("%s does not name the relay's write policy (writePolicy, grasp-sync strfry-policy)", f)
		}
	}
}

// k8sDeployment is the part of deploy/kubernetes/deployment.yaml the tests read.
type k8sDeployment struct {
	Spec struct {
		Template struct {
			Metadata struct {
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				InitContainers []struct {
					Name         string   `yaml:"name"`
					Image        string   `yaml:"image"`
					Command      []string `yaml:"command"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"initContainers"`
				Containers []struct {
					Name  string `yaml:"name"`
					Image string `yaml:"image"`
					Env   []struct {
						Name      string `yaml:"name"`
						Value     string `yaml:"value"`
						ValueFrom *struct {
							SecretKeyRef *struct {
								Name     string `yaml:"name"`
								Optional bool   `yaml:"optional"`
							} `yaml:"secretKeyRef"`
						} `yaml:"valueFrom"`
					} `yaml:"env"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
						SubPath   string `yaml:"subPath"`
					} `yaml:"volumeMounts"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					ReadinessProbe any `yaml:"readinessProbe"`
					LivenessProbe  any `yaml:"livenessProbe"`
				} `yaml:"containers"`
				Volumes []struct {
					Name     string `yaml:"name"`
					EmptyDir any    `yaml:"emptyDir"`
					Secret   *struct {
						Optional bool `yaml:"optional"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func TestKubernetesDeploy(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("../../deploy/kubernetes/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var d k8sDeployment
	if err := yaml.Unmarshal(read("deployment.yaml"), &d); err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template
	var svc struct {
		Metadata struct {
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
	}
	if err := yaml.Unmarshal(read("service.yaml"), &svc); err != nil {
		t.Fatal(err)
	}
	// One scrape target: the Pod, not the Service as well.
	if pod.Metadata.Annotations["prometheus.io/scrape"] != "true" {
		t.Error("the Pod is not annotated for scraping")
	}
	for k := range svc.Metadata.Annotations {
		if strings.HasPrefix(k, "prometheus.io/") {
			t.Errorf("service.yaml: annotation %s makes Prometheus scrape grasp-sync twice", k)
		}
	}
	var kust struct {
		Images []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
			Digest  string `yaml:"digest"`
		} `yaml:"images"`
	}
	if err := yaml.Unmarshal(read("kustomization.yaml"), &kust); err != nil {
		t.Fatal(err)
	}
	replaced := map[string]bool{}
	for _, im := range kust.Images {
		replaced[im.Name] = true
		if im.Digest == "" && (im.NewTag == "" || im.NewTag == "latest") {
			t.Errorf("kustomization.yaml: image %s is not pinned", im.Name)
		}
	}
	seen := false
	stateMounted := map[string]bool{}
	for _, c := range pod.Spec.Containers {
		if !pinned(c.Image) && !replaced[c.Image] {
			t.Errorf("container %s: image %q is neither pinned nor set by kustomization.yaml", c.Name, c.Image)
		}
		if c.Name != "grasp-sync" {
			continue
		}
		seen = true
		for _, m := range c.VolumeMounts {
			stateMounted[m.MountPath] = true
		}
		// Pod readiness gates the relay's Service: the sidecar must not
		// take the relay out of rotation.
		if c.ReadinessProbe != nil {
			t.Error("grasp-sync has a readinessProbe: the relay would leave its Service whenever the sidecar restarts")
		}
		if c.LivenessProbe == nil {
			t.Error("grasp-sync has no livenessProbe")
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !e.ValueFrom.SecretKeyRef.Optional {
				t.Errorf("env %s: Secret %s is not optional, the Pod would not start without it", e.Name, e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	if !seen {
		t.Fatal("no grasp-sync container")
	}
	// The ConfigMap's state.dir is a mounted volume of the grasp-sync container.
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(read("configmap.yaml"), &cm); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(strings.NewReader(cm.Data["grasp-sync.yml"]))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.State.Dir == "" || !stateMounted[cfg.State.Dir] {
		t.Errorf("state.dir %q is not a volume mount of the grasp-sync container", cfg.State.Dir)
	}
	// Like compose: no other container creates repositories on the git
	// volume, so without create_missing_repos every state and PR event
	// would expire in purgatory.
	if cfg.GitDir == "" || !cfg.Purgatory.CreateMissingRepos {
		t.Errorf("ConfigMap: git_dir %q with create_missing_repos %v: nothing creates repositories on the volume", cfg.GitDir, cfg.Purgatory.CreateMissingRepos)
	}
	// Clones are served on a named container port the Service exposes.
	gitPort := listenPort(cfg.GitHTTP.Listen)
	if gitPort == "" {
		t.Error("ConfigMap: git_http.listen is not set: no clones are served")
	}
	var service struct {
		Spec struct {
			Ports []struct {
				Name       string `yaml:"name"`
				Port       int    `yaml:"port"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(read("service.yaml"), &service); err != nil {
		t.Fatal(err)
	}
	exposed := false
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if c.Name != "grasp-sync" || fmt.Sprint(cp.ContainerPort) != gitPort {
				continue
			}
			for _, sp := range service.Spec.Ports {
				exposed = exposed || sp.TargetPort == cp.Name
			}
		}
	}
	if !exposed {
		t.Errorf("the git server's port %q is not a grasp-sync container port the Service targets", gitPort)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && !v.Secret.Optional {
			t.Errorf("volume %s: Secret is not optional, the Pod would not start without it", v.Name)
		}
	}

	// The relay's write policy is grasp-sync's plugin: the init container
	// puts it, with compose's script, on the plugin volume the relay mounts
	// at /plugin; the plugin reads the ConfigMap's grasp-sync.yml.
	if err := cfg.ValidateStrfryPolicy(); err != nil {
		t.Errorf("ConfigMap: the plugin's configuration is invalid: %v", err)
	}
	var c composeFile
	if err := yaml.Unmarshal(readFile(t, "../../deploy/docker-compose.yml"), &c); err != nil {
		t.Fatal(err)
	}
	compose := c.Services["plugin-init"].Entrypoint
	installed := false
	for _, ic := range pod.Spec.InitContainers {
		if len(ic.Command) == 3 && len(compose) == 3 && ic.Command[2] == compose[2] {
			installed = ic.Image == "grasp-sync"
			for _, m := range ic.VolumeMounts {
				if m.MountPath == "/plugin" {
					installed = installed && m.Name == "plugin"
				}
			}
		}
	}
	if !installed {
		t.Error("no init container of the grasp-sync image runs docker-compose.yml's plugin-init script with the plugin volume at /plugin")
	}
	relayOK := false
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name != "relay" {
			continue
		}
		mounts := map[string]string{}
		for _, m := range ctr.VolumeMounts {
			mounts[m.MountPath] = m.Name + "/" + m.SubPath
		}
		for _, e := range ctr.Env {
			if e.Name == EnvConfig {
				relayOK = mounts[e.Value] == "config/grasp-sync.yml" && mounts["/plugin"] == "plugin/"
			}
		}
	}
	if !relayOK {
		t.Errorf("the relay container does not mount the plugin volume at /plugin and the ConfigMap's grasp-sync.yml at its %s", EnvConfig)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// listenPort is the port of a listen address (":8080", "0.0.0.0:8080"),
// "" when there is none.
func listenPort(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return port
}
