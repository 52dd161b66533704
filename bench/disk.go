package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/srt-mcp/srt-mcp/sessions"
	"github.com/srt-mcp/srt-mcp/volume"
)

// disk measures workspaces that are filesystems of their own against
// workspaces that are directories, on the same host filesystem in the same
// run: creating a session (a ready volume taken, and a volume made while
// the caller waits), writing 1 GB sequentially, and writing 10,000 small
// files, each interleaved over a few rounds.
func (s *suite) disk() error {
	if ok, why := volume.Supported(); !ok {
		return errors.New(why)
	}
	base, err := os.MkdirTemp("", "srt-mcp-bench-disk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	open := func(name string, volumeBytes int64) (*sessions.Registry, error) {
		r, err := sessions.New(sessions.Config{StateDir: filepath.Join(base, name), Max: 1000, VolumeBytes: volumeBytes})
		if err == nil {
			r.StartVolumes()
		}
		return r, err
	}
	dirs, err := open("dirs", 0)
	if err != nil {
		return err
	}
	defer dirs.Shutdown()
	vols, err := open("volumes", 2<<30)
	if err != nil {
		return err
	}
	defer vols.Shutdown()
	if ok, note := vols.VolumeStatus(); !ok {
		return errors.New(note)
	}
	create := func(r *sessions.Registry) (float64, *sessions.Session, error) {
		start := time.Now()
		ss, _, err := r.Open("", "bench")
		return float64(time.Since(start).Microseconds()) / 1000, ss, err
	}
	var dirMs, readyMs, coldMs []float64
	for i := 0; i < 20; i++ {
		ms, ss, err := create(dirs)
		if err != nil {
			return err
		}
		dirMs = append(dirMs, ms)
		_ = dirs.Close(ss.ID)
		time.Sleep(50 * time.Millisecond) // the filler makes the next ready volume
		ms, ss, err = create(vols)
		if err != nil {
			return err
		}
		readyMs = append(readyMs, ms)
		// At once again: no volume is ready, one is made while it waits.
		ms2, ss2, err := create(vols)
		if err != nil {
			return err
		}
		coldMs = append(coldMs, ms2)
		_ = vols.Close(ss.ID)
		_ = vols.Close(ss2.ID)
	}
	s.printf("%-44s %9s %9s\n", "creating a session", "p50", "p90")
	s.printf("%-44s %7.2fms %7.2fms\n", "a directory (the anchor)", median(dirMs), pct(dirMs, 0.9))
	s.printf("%-44s %7.2fms %7.2fms\n", "a filesystem, a ready one taken", median(readyMs), pct(readyMs, 0.9))
	s.printf("%-44s %7.2fms %7.2fms\n", "a filesystem made while the caller waits", median(coldMs), pct(coldMs, 0.9))
	d := median(readyMs) - median(dirMs)
	s.add(Row{Path: "creating a data session: own filesystem vs directory, p50", Now: fmt.Sprintf("%.2f ms", median(readyMs)),
		Anchor: fmt.Sprintf("%.2f ms", median(dirMs)), Ratio: fmt.Sprintf("%+.2f ms", d), Goal: "<= +5 ms", Met: d <= 5})

	dirSS, _, err := dirs.Open("", "bench")
	if err != nil {
		return err
	}
	volSS, _, err := vols.Open("", "bench")
	if err != nil {
		return err
	}
	type result struct{ dir, vol []float64 }
	var seq, small result
	for round := 0; round < 5; round++ {
		for _, w := range []struct {
			ws  string
			out *[]float64
			sm  *[]float64
		}{{dirSS.Workspace, &seq.dir, &small.dir}, {volSS.Workspace, &seq.vol, &small.vol}} {
			mbs, err := writeSequential(filepath.Join(w.ws, "seq.bin"), 1<<30)
			if err != nil {
				return err
			}
			*w.out = append(*w.out, mbs)
			fps, err := writeSmall(filepath.Join(w.ws, "small"), 10000)
			if err != nil {
				return err
			}
			*w.sm = append(*w.sm, fps)
		}
	}
	s.printf("\n%-44s %12s %12s %8s\n", "writing in the workspace (median of 5)", "directory", "filesystem", "ratio")
	s.printf("%-44s %8.0f MB/s %8.0f MB/s %7.2fx\n", "1 GB sequential, fsync", median(seq.dir), median(seq.vol), median(seq.vol)/median(seq.dir))
	s.printf("%-44s %6.0f files/s %6.0f files/s %7.2fx\n", "10,000 files of 4 KiB", median(small.dir), median(small.vol), median(small.vol)/median(small.dir))
	r := median(seq.vol) / median(seq.dir)
	s.add(Row{Path: "1 GB sequential write: own filesystem vs directory", Now: fmt.Sprintf("%.0f MB/s", median(seq.vol)),
		Anchor: fmt.Sprintf("%.0f MB/s", median(seq.dir)), Ratio: fmt.Sprintf("%.2fx", r), Goal: ">= 0.9x", Met: r >= 0.9})
	r = median(small.vol) / median(small.dir)
	s.add(Row{Path: "10,000 small files: own filesystem vs directory", Now: fmt.Sprintf("%.0f files/s", median(small.vol)),
		Anchor: fmt.Sprintf("%.0f files/s", median(small.dir)), Ratio: fmt.Sprintf("%.2fx", r), Goal: ">= 0.9x", Met: r >= 0.9})
	return nil
}

// writeSequential writes n bytes to path in 1 MiB writes, fsyncs, removes
// the file, and returns MB/s.
func writeSequential(path string, n int64) (float64, error) {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	start := time.Now()
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	for done := int64(0); done < n; done += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return 0, err
		}
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	el := time.Since(start)
	os.Remove(path)
	return float64(n) / 1e6 / el.Seconds(), err
}

// writeSmall writes n files of 4 KiB in dir, syncs the filesystem, removes
// them, and returns files/s.
func writeSmall(dir string, n int) (float64, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	buf := make([]byte, 4096)
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), buf, 0o600); err != nil {
			return 0, err
		}
	}
	d, err := os.Open(dir)
	if err == nil {
		err = syncFS(d)
		d.Close()
	}
	return float64(n) / time.Since(start).Seconds(), err
}
