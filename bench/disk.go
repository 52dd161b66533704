package bench

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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
	if err := s.snapshotAndFork(vols, volSS, base); err != nil {
		return err
	}
	return s.persistentResume()
}

// snapshotAndFork measures snapshot_workspace and fork_workspace of a
// workspace holding 100 MB (incompressible, in 10 files), against copying
// those files on the host (the anchor: the bytes a copy must move).
func (s *suite) snapshotAndFork(vols *sessions.Registry, ss *sessions.Session, base string) error {
	buf := make([]byte, 10<<20)
	for i := 0; i < 10; i++ {
		_, _ = rand.Read(buf)
		if err := os.WriteFile(filepath.Join(ss.Workspace, fmt.Sprintf("d%d.bin", i)), buf, 0o600); err != nil {
			return err
		}
	}
	var snapMs, forkMs, copyMs []float64
	for round := 0; round < 5; round++ {
		start := time.Now()
		info, err := vols.Snapshot(ss, "bench", time.Hour, 0, nil)
		if err != nil {
			return err
		}
		snapMs = append(snapMs, sinceMS(start))
		_ = vols.DeleteSnapshot(info.ID, ss.Principal)
		dst, _, err := vols.Open("", ss.Principal)
		if err != nil {
			return err
		}
		start = time.Now()
		if err := vols.Fork(ss, dst, nil); err != nil {
			return err
		}
		forkMs = append(forkMs, sinceMS(start))
		_ = vols.Close(dst.ID)
		to := filepath.Join(base, fmt.Sprintf("copy-%d", round))
		start = time.Now()
		if err := copyFiles(ss.Workspace, to); err != nil {
			return err
		}
		copyMs = append(copyMs, sinceMS(start))
		_ = os.RemoveAll(to)
	}
	s.printf("\n%-44s %9s %9s\n", "a workspace holding 100 MB (median of 5)", "p50", "max")
	s.printf("%-44s %7.1fms %7.1fms\n", "copying its files on the host (the anchor)", median(copyMs), pct(copyMs, 1))
	s.printf("%-44s %7.1fms %7.1fms\n", "snapshot_workspace", median(snapMs), pct(snapMs, 1))
	s.printf("%-44s %7.1fms %7.1fms\n", "fork_workspace {session_id}", median(forkMs), pct(forkMs, 1))
	for _, r := range []struct {
		name string
		ms   []float64
	}{{"snapshot of a 100 MB workspace", snapMs}, {"fork of a 100 MB workspace", forkMs}} {
		s.add(Row{Path: r.name, Now: fmt.Sprintf("%.0f ms", median(r.ms)), Anchor: fmt.Sprintf("%.0f ms (host copy)", median(copyMs)),
			Ratio: fmt.Sprintf("%.2fx", median(r.ms)/median(copyMs)), Goal: "<= 300 ms", Met: median(r.ms) <= 300})
	}
	return nil
}

// copyFiles copies the regular files of dir into a new directory to, each
// synced (what a copy of a workspace's files costs on the host).
func copyFiles(dir, to string) error {
	if err := os.Mkdir(to, 0o700); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		out, err := os.Create(filepath.Join(to, e.Name()))
		if err == nil {
			_, err = io.Copy(out, in)
			if err == nil {
				err = out.Sync()
			}
			out.Close()
		}
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// persistentResume measures the first cell of a persistent workspace
// after its server was killed and started again (its filesystem mounted
// again, its interpreter started), against the first cell of a new
// workspace on the same server (an interpreter's start: the anchor).
func (s *suite) persistentResume() error {
	state, err := os.MkdirTemp("", "srt-mcp-bench-persist-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	args := []string{"--backend", "native", "--rate-limit", "1000000", "--warm-pool", "0"}
	var resumeMs, newMs []float64
	var sid string
	for round := 0; round < 5; round++ {
		b, err := startServerIn(s.Binary, state, true, args...)
		if err != nil {
			return err
		}
		if sid == "" {
			sc, err := b.tool("create_session", map[string]any{"language": "python", "name": "bench", "persist": true})
			if err != nil {
				b.stop()
				return err
			}
			sid = fmt.Sprint(sc["session_id"])
			if _, err := b.tool("execute_code", map[string]any{"session_id": sid, "language": "python", "code": "open('keep.txt', 'w').write('kept')"}); err != nil {
				b.stop()
				return err
			}
		} else {
			start := time.Now()
			sc, err := b.tool("execute_code", map[string]any{"session_id": sid, "language": "python", "code": "print(open('keep.txt').read())"})
			if err != nil || !strings.Contains(fmt.Sprint(sc["stdout"]), "kept") {
				b.stop()
				return fmt.Errorf("the first cell after a restart: %v %v", sc, err)
			}
			resumeMs = append(resumeMs, sinceMS(start))
			start = time.Now()
			if _, err := b.tool("execute_code", map[string]any{"language": "python", "code": "print(1)"}); err != nil {
				b.stop()
				return err
			}
			newMs = append(newMs, sinceMS(start))
		}
		if round == 4 {
			b.stop() // the last one unmounts what it has: the state directory goes
			break
		}
		_ = b.cmd.Process.Kill() // a crash: nothing suspended
		_ = b.cmd.Wait()
	}
	s.printf("\n%-44s %9s %9s\n", "first cell after the server was killed", "p50", "max")
	s.printf("%-44s %7.0fms %7.0fms\n", "a new workspace (the anchor)", median(newMs), pct(newMs, 1))
	s.printf("%-44s %7.0fms %7.0fms\n", "a persistent workspace, resumed", median(resumeMs), pct(resumeMs, 1))
	s.add(Row{Path: "persistent workspace: first cell after a crash", Now: fmt.Sprintf("%.0f ms", median(resumeMs)),
		Anchor: fmt.Sprintf("%.0f ms (new workspace)", median(newMs)), Ratio: fmt.Sprintf("%.2fx", median(resumeMs)/median(newMs)),
		Goal: "<= 1 s", Met: pct(resumeMs, 1) <= 1000})
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
