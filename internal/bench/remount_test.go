package bench

import "testing"

func TestOptionString(t *testing.T) {
	t.Parallel()
	opts := map[string]string{"vers": "3", "rsize": "65536", "hard": "", "addr": "10.0.0.5", "mountaddr": "10.0.0.5", "namlen": "255", "nolock": "", "sec": "sys"}
	tests := []struct {
		v    Variant
		want string
	}{
		{Variant{}, "hard,nolock,rsize=65536,sec=sys,vers=3"},
		{Variant{NConnect: 4, RSize: 1048576}, "hard,nconnect=4,nolock,rsize=1048576,sec=sys,vers=3"},
	}
	for _, tt := range tests {
		if got := optionString(opts, tt.v); got != tt.want {
			t.Errorf("optionString(%+v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
