// Package deploy holds srt-mcp's deployment files (deploy/kubernetes,
// deploy/systemd); its tests check them offline.
package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// documents returns every YAML document under kubernetes/, by kind.
func documents(t *testing.T) map[string][][]byte {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	out := map[string][][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil || meta.Kind == "" {
				t.Fatalf("%s document %d: no kind (%v)", f, i, err)
			}
			out[meta.APIVersion+"/"+meta.Kind] = append(out[meta.APIVersion+"/"+meta.Kind], doc)
		}
	}
	return out
}

// strict decodes doc into v; an unknown or misspelt field is an error.
func strict(t *testing.T, doc []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Fatalf("%T: %v", v, err)
	}
}

// Every document decodes strictly into the real Kubernetes types, and the
// fields srt-mcp depends on are set as the README says.
func TestKubernetesManifests(t *testing.T) {
	docs := documents(t)
	for kind := range docs {
		if !slices.Contains([]string{"v1/ConfigMap", "v1/Service", "apps/v1/StatefulSet", "apps/v1/Deployment"}, kind) {
			t.Errorf("unexpected kind %s", kind)
		}
	}
	if len(docs["apps/v1/StatefulSet"]) != 1 {
		t.Fatalf("want one StatefulSet, got %d", len(docs["apps/v1/StatefulSet"]))
	}
	var ss appsv1.StatefulSet
	strict(t, docs["apps/v1/StatefulSet"][0], &ss)
	spec := ss.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("containers: %d", len(spec.Containers))
	}
	c := spec.Containers[0]

	// Readiness is /readyz (503 while draining), liveness /healthz.
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe: %+v", p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe: %+v", p)
	}
	// The replica id is the pod's name: every handle names its pod.
	replica := false
	for _, e := range c.Env {
		if e.Name == "SANDBOX_REPLICA_ID" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			replica = true
		}
		if e.Name == "SANDBOX_AUTH_TOKEN" && e.Value != "" {
			t.Error("the token is a literal in the manifest; take it from a Secret")
		}
	}
	if !replica {
		t.Error("SANDBOX_REPLICA_ID is not the pod's name")
	}
	if ss.Spec.ServiceName == "" {
		t.Error("no governing (headless) Service: pods have no DNS names to route to")
	}
	// Least privilege that bubblewrap still works with: not root, no
	// privilege escalation, every capability dropped, never privileged.
	psc, csc := spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod security context must run as a non-root uid: %+v", psc)
	}
	if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") || len(csc.Capabilities.Add) > 0 ||
		(csc.Privileged != nil && *csc.Privileged) {
		t.Errorf("container security context: %+v", csc)
	}
	if spec.HostUsers == nil || *spec.HostUsers {
		t.Error("the pod needs a user namespace of its own (hostUsers: false) for an unmasked /proc")
	}
	if csc.ProcMount == nil || *csc.ProcMount != corev1.UnmaskedProcMount {
		t.Error("bwrap mounts its own /proc: procMount must be Unmasked")
	}
	// Limits are set, and the grace period outlasts the drain.
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Limits.Cpu().IsZero() {
		t.Errorf("resource limits: %+v", c.Resources.Limits)
	}
	drain := 25 * time.Second
	for i, a := range c.Args {
		if a == "--drain-timeout" && i+1 < len(c.Args) {
			drain, _ = time.ParseDuration(c.Args[i+1])
		}
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drain+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds does not outlast the drain (%v) by 5 s", drain)
	}
	if !slices.Contains(c.Args, "--config") {
		t.Error("serve is not given the settings file")
	}

	// The routing proxy: one HAProxy backend per replica, each at the
	// pod's name under the headless Service; the entry Service selects the
	// proxy, the headless one the replicas.
	if len(docs["apps/v1/Deployment"]) != 1 {
		t.Fatalf("want one Deployment (the routing proxy), got %d", len(docs["apps/v1/Deployment"]))
	}
	var proxy appsv1.Deployment
	strict(t, docs["apps/v1/Deployment"][0], &proxy)
	cfg, err := os.ReadFile("haproxy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	replicas := int(*ss.Spec.Replicas)
	env := map[string]string{}
	for _, e := range proxy.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for i := 0; i < replicas; i++ {
		name := fmt.Sprintf("srt-mcp-%d", i)
		if !strings.Contains(string(cfg), "\nbackend "+name+"\n") {
			t.Errorf("haproxy.cfg has no backend %s for StatefulSet pod %d", name, i)
		}
		if want := fmt.Sprintf("%s.%s:8080", name, ss.Spec.ServiceName); env[fmt.Sprintf("SRT_MCP_%d", i)] != want {
			t.Errorf("the proxy's SRT_MCP_%d is %q, want %q", i, env[fmt.Sprintf("SRT_MCP_%d", i)], want)
		}
	}
	if n := strings.Count(string(cfg), "\nbackend srt-mcp-"); n != replicas {
		t.Errorf("haproxy.cfg routes to %d replicas, the StatefulSet has %d", n, replicas)
	}
	for _, doc := range docs["v1/Service"] {
		var svc corev1.Service
		strict(t, doc, &svc)
		target := ss.Spec.Template.Labels
		if svc.Name == "srt-mcp" {
			target = proxy.Spec.Template.Labels // clients enter through the proxy
		} else if svc.Name != ss.Spec.ServiceName || svc.Spec.ClusterIP != "None" {
			t.Errorf("unexpected Service %s", svc.Name)
		}
		for k, v := range svc.Spec.Selector {
			if target[k] != v {
				t.Errorf("Service %s selects %s=%s, which its pods do not carry", svc.Name, k, v)
			}
		}
	}
	for _, doc := range docs["v1/ConfigMap"] {
		var cm corev1.ConfigMap
		strict(t, doc, &cm)
		if s, ok := cm.Data["settings.json"]; ok {
			var v map[string]any
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				t.Errorf("ConfigMap %s settings.json: %v", cm.Name, err)
			}
		}
	}
}

// kubectl apply -k deploy/ finds every resource and the proxy's
// configuration file it names.
func TestKustomization(t *testing.T) {
	var k struct {
		APIVersion         string   `json:"apiVersion"`
		Kind               string   `json:"kind"`
		Resources          []string `json:"resources"`
		ConfigMapGenerator []struct {
			Name  string   `json:"name"`
			Files []string `json:"files"`
		} `json:"configMapGenerator"`
		GeneratorOptions map[string]any `json:"generatorOptions"`
	}
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("kubernetes/*.yaml")
	for _, f := range files {
		if !slices.Contains(k.Resources, f) {
			t.Errorf("kustomization.yaml does not list %s", f)
		}
	}
	for _, g := range k.ConfigMapGenerator {
		for _, f := range g.Files {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("configMapGenerator %s: %v", g.Name, err)
			}
		}
	}
}

// The systemd unit starts serve with the settings file and gives the
// drain its time before systemd kills the rest.
func TestSystemdUnit(t *testing.T) {
	data, err := os.ReadFile("systemd/srt-mcp.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{"ExecStart=/usr/local/bin/srt-mcp serve", "--config /etc/srt-mcp/settings.json", "KillSignal=SIGTERM", "TimeoutStopSec=40"} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
	for _, breaks := range []string{"NoNewPrivileges=true", "RestrictNamespaces=", "SystemCallFilter=", "PrivateDevices=true", "ProtectKernelTunables=true", "ProtectProc=", "ProtectControlGroups=true"} {
		if strings.Contains(unit, breaks) {
			t.Errorf("the unit sets %s, which breaks bubblewrap", breaks)
		}
	}
}
