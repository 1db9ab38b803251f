package deploy

import (
	"os"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nfstune/nfstune/internal/version"
)

// TestChartVersionIsRelease keeps the chart's version and appVersion on the release that
// `nfstune version` reports (internal/version/VERSION): `make release` packages the chart
// with both set from the build's version, and a `helm install` from this directory pulls
// the image tagged appVersion.
func TestChartVersionIsRelease(t *testing.T) {
	b, err := os.ReadFile("helm/nfstune/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(version.Release) {
		t.Fatalf("internal/version/VERSION = %q, want vMAJOR.MINOR.PATCH", version.Release)
	}
	if chart.AppVersion != version.Release {
		t.Errorf("Chart.yaml appVersion = %q, want the release %q (internal/version/VERSION)", chart.AppVersion, version.Release)
	}
	if want := version.Release[1:]; chart.Version != want {
		t.Errorf("Chart.yaml version = %q, want %q (the release %s without its v)", chart.Version, want, version.Release)
	}
}
