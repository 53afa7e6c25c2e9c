package deploy

import (
	"bytes"
	"context"
	"os"
	"os/exec"

	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// ruleTests is the part of promtool's unit-test file format this checks.
type ruleTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `json:"exp_labels"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertHasRuleTests: every alert of alerts.yml has a case in
// alerts_test.yml where it fires and one where it must not, and every case
// names an alert that exists.
func TestEveryAlertHasRuleTests(t *testing.T) {
	var rf ruleFile
	if err := yaml.Unmarshal(read(t, "deploy", "prometheus", "alerts.yml"), &rf); err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(read(t, "deploy", "prometheus", "alerts_test.yml"), &rt); err != nil {
		t.Fatal(err)
	}
	if len(rt.RuleFiles) != 1 || rt.RuleFiles[0] != "alerts.yml" {
		t.Errorf("alerts_test.yml tests %v, want [alerts.yml]", rt.RuleFiles)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			if !fires[r.Alert] {
				t.Errorf("alert %s has no case in alerts_test.yml where it fires", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("alert %s has no case in alerts_test.yml where it must not fire", r.Alert)
			}
		}
	}
	for name := range fires {
		if !alerts[name] {
			t.Errorf("alerts_test.yml tests %s, which alerts.yml does not define", name)
		}
	}
	if len(alerts) == 0 {
		t.Fatal("no alerts in alerts.yml")
	}
}

// TestPromtoolTestRules runs `promtool test rules` on alerts_test.yml with
// Prometheus' own promtool (scripts/promtool.sh: from Debian's prometheus
// package). Without apt it is skipped locally with the reason, never under
// CI.
func TestPromtoolTestRules(t *testing.T) {
	promtool := promtoolPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "test", "rules", "alerts_test.yml")
	cmd.Dir = path("deploy", "prometheus")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	check := exec.CommandContext(ctx, promtool, "check", "rules", "alerts.yml")
	check.Dir = cmd.Dir
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

func promtoolPath(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("apt-get"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool: apt-get is missing, and CI must run promtool test rules")
		}
		t.Skip("promtool: apt-get is missing (scripts/promtool.sh takes promtool from Debian's prometheus package)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", path("scripts", "promtool.sh"), "path")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := "scripts/promtool.sh: " + err.Error() + "\n" + errb.String()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return strings.TrimSpace(out.String())
}
