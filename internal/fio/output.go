// Package fio runs the fio benchmark and parses its JSON output. It is the only package
// that executes fio; callers build the arguments from nfstune's built-in profiles and never
// pass a user-supplied job file (fio job files can run programs through ioengine=exec).
//
// The parser copes with the ways real fio output departs from a clean document: non-JSON
// lines before the JSON (warnings, "fio: ..." notes), several concatenated JSON objects
// when --status-interval is set, options given at global level instead of per job,
// percentile keys that are printf("%f") strings such as "99.000000", latency recorded in
// clat_ns rather than lat_ns, and the metadata engines (filecreate, filestat, filedelete),
// whose operation count is the latency sample count rather than total_ios.
// See https://fio.readthedocs.io/en/latest/fio_doc.html#json-output.
package fio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// ErrNoJSON is returned by Parse when the output holds no fio JSON document.
var ErrNoJSON = errors.New("no fio JSON document in output")

// Output is one fio JSON document (--output-format=json).
type Output struct {
	Version       string            `json:"fio version"`
	Timestamp     int64             `json:"timestamp"`
	GlobalOptions map[string]string `json:"global options"`
	Jobs          []Job             `json:"jobs"`
	// ClientStats replaces Jobs in client/server mode.
	ClientStats []Job `json:"client_stats"`
}

// Job is one entry of "jobs": a single job, or a whole group with group_reporting.
type Job struct {
	Name    string            `json:"jobname"`
	GroupID int               `json:"groupid"`
	Error   int               `json:"error"`
	Options map[string]string `json:"job options"`
	Read    Direction         `json:"read"`
	Write   Direction         `json:"write"`
	Trim    Direction         `json:"trim"`
	// JobRuntime is the job's run time in milliseconds.
	JobRuntime int64   `json:"job_runtime"`
	UsrCPU     float64 `json:"usr_cpu"`
	SysCPU     float64 `json:"sys_cpu"`
}

// Direction holds one data direction's counters.
type Direction struct {
	IOBytes  int64   `json:"io_bytes"`
	BWBytes  int64   `json:"bw_bytes"` // bytes per second
	BWKiB    int64   `json:"bw"`       // KiB per second
	IOPS     float64 `json:"iops"`
	Runtime  int64   `json:"runtime"` // milliseconds
	TotalIOs int64   `json:"total_ios"`
	SLat     Latency `json:"slat_ns"`
	CLat     Latency `json:"clat_ns"`
	Lat      Latency `json:"lat_ns"`
}

// Latency is a latency distribution in nanoseconds.
type Latency struct {
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
	StdDev float64 `json:"stddev"`
	N      int64   `json:"N"`
	// Percentile maps fio's "%f" keys ("50.000000") to nanoseconds.
	Percentiles map[string]float64 `json:"percentile"`
}

// Percentile returns the value at percentile p (e.g. 99) and whether fio reported it.
// Keys are matched numerically, so "99.000000", "99" and "99.0" are all found.
func (l Latency) Percentile(p float64) (float64, bool) {
	for k, v := range l.Percentiles {
		f, err := strconv.ParseFloat(k, 64)
		if err != nil {
			continue
		}
		if math.Abs(f-p) < 1e-6 {
			return v, true
		}
	}
	return 0, false
}

// Option returns a job's option, falling back to the global options; fio lists an option
// given before the first --name (or in [global]) only under "global options".
func (o *Output) Option(j *Job, key string) (string, bool) {
	if v, ok := j.Options[key]; ok {
		return v, true
	}
	v, ok := o.GlobalOptions[key]
	return v, ok
}

// Parse extracts the fio JSON document from out. Lines before the first "{" line are
// skipped (fio prints warnings there). When several documents follow one another, as with
// --status-interval, the last complete one is the final result and is returned.
func Parse(out []byte) (*Output, error) {
	start := jsonStart(out)
	if start < 0 {
		return nil, ErrNoJSON
	}
	dec := json.NewDecoder(bytes.NewReader(out[start:]))
	var last *Output
	for {
		var o Output
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if last != nil {
				break // trailing garbage after a complete document
			}
			return nil, fmt.Errorf("decoding fio JSON: %w", err)
		}
		last = &o
	}
	if last == nil {
		return nil, ErrNoJSON
	}
	if len(last.Jobs) == 0 && len(last.ClientStats) > 0 {
		last.Jobs = last.ClientStats
	}
	if len(last.Jobs) == 0 {
		return nil, fmt.Errorf("fio JSON has no jobs")
	}
	return last, nil
}

// jsonStart returns the offset of the first line that starts with "{", or -1.
func jsonStart(b []byte) int {
	off := 0
	for off < len(b) {
		line := b[off:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		if t := bytes.TrimLeft(line, " \t\r"); len(t) > 0 && t[0] == '{' {
			return off + len(line) - len(t)
		}
		off += len(line)
	}
	return -1
}
