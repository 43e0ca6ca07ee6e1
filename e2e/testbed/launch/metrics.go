package launch

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Metrics is one scrape of a Prometheus text endpoint: every sample's
// series (name with its label block, as written, e.g.
// `switchyard_controlplane_connected_agents{rpc="delta"}`) to its value.
type Metrics map[string]float64

// ScrapeMetrics GETs url (a /metrics endpoint) with client and parses it.
// client nil is http.DefaultClient; a process inside a namespace needs a
// client that dials there.
func ScrapeMetrics(ctx context.Context, client *http.Client, url string) (Metrics, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	m, err := ParseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return m, nil
}

// ParseMetrics reads the Prometheus text format. Comments, blank lines and
// samples whose value does not parse are skipped; a trailing timestamp is
// dropped.
func ParseMetrics(r io.Reader) (Metrics, error) {
	out := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		series, val := line[:i], line[i+1:]
		if j := strings.LastIndexByte(series, ' '); j >= 0 && !strings.Contains(series[j:], "}") {
			series, val = series[:j], series[j+1:] // "name value timestamp"
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		out[series] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return out, nil
}

// Sum adds up the samples of metric whose label block contains every
// string in match (`verb="WATCH"`); it fails when no sample matches.
func (m Metrics) Sum(metric string, match ...string) (float64, error) {
	var sum float64
	found := false
series:
	for series, v := range m {
		name, labels, _ := strings.Cut(series, "{")
		if name != metric {
			continue
		}
		for _, s := range match {
			if !strings.Contains(labels, s) {
				continue series
			}
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("metric %s %v not exposed", metric, match)
	}
	return sum, nil
}
