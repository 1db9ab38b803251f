package readahead

import "testing"

// window is 60 s of traffic at rate MiB/s of application reads with the given over-read.
func window(rateMiB, overRead float64) Evidence {
	e := Evidence{Seconds: 60, AppReadBytes: uint64(rateMiB * 60 * (1 << 20))}
	e.ServerReadBytes = uint64(float64(e.AppReadBytes) * overRead)
	e.derive()
	return e
}

// timed is window with READ timing: READs of readKiB each, inFlight of them outstanding on
// average (the summed round trips are inFlight x 60 s, Little's law).
func timed(rateMiB, overRead, readKiB, inFlight float64) Evidence {
	e := window(rateMiB, overRead)
	e.Reads = uint64(float64(e.ServerReadBytes) / (readKiB * 1024))
	e.ReadRTTSeconds = inFlight * e.Seconds
	e.derive()
	return e
}

func TestJudge(t *testing.T) {
	for _, tt := range []struct {
		name          string
		before, after Evidence
		want          Verdict
	}{
		// The field figures: 650 MB/s at 128 KiB, 942 at 1024, 380 at 15360.
		{"128 to 1024 KiB", window(620, 1.0), window(898, 1.0), Helped},
		{"1024 to 15360 KiB", window(898, 1.0), window(362, 1.0), Hurt},
		// 16 readers in a small cgroup: 42 MiB/s untuned, 21 at 15360 with 3.9x over-read.
		{"untuned to 15360 KiB, small cgroup", window(42, 1.2), window(21, 3.9), Hurt},
		{"same rate, over-read 3.9 to 1.1", window(60, 3.9), window(61, 1.1), Helped},
		{"same rate, over-read 1.0 to 1.5", window(60, 1.0), window(59, 1.5), Hurt},
		{"random reader: within 10 %", window(30, 1.0), window(31.5, 1.05), NoChange},
		{"just under 10 % faster", window(100, 1.0), window(109, 1.0), NoChange},
		{"idle before", window(0.5, 1.0), window(100, 1.0), TooLittleTraffic},
		// The control: the server's time per READ of the same size.
		{"random readers, the host slowed: same READs, each answered 1.4x slower", timed(30, 0.88, 16, 16), timed(21, 0.89, 16, 16), NoChange},
		{"random readers, slower, answers as fast", timed(30, 0.88, 16, 16), timed(21, 0.89, 16, 11.2), Hurt},
		{"the server got faster", timed(30, 1.0, 16, 16), timed(40, 1.0, 16, 16), NoChange},
		{"a larger window queues more at the server", timed(100, 1.0, 1024, 4), timed(80, 1.0, 1024, 8), Hurt},
		{"larger READs: the change's own doing", timed(60, 1.0, 128, 2), timed(120, 1.0, 1024, 4), Helped},
		{"over-read rose with slower answers", timed(60, 1.0, 1024, 4), timed(40, 1.5, 1024, 4), Hurt},
		{"slower answers explain only part", timed(30, 1.0, 16, 16), timed(15, 1.0, 16, 12), Hurt},
		{"idle after", window(100, 1.0), Evidence{Seconds: 60}, TooLittleTraffic},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, why := Judge(tt.before, tt.after)
			if got != tt.want {
				t.Errorf("Judge = %s (%s), want %s", got, why, tt.want)
			}
			if why == "" {
				t.Error("no reason")
			}
		})
	}
}
