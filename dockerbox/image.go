package dockerbox

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"
)

//go:embed Dockerfile
var dockerfile []byte

// ImagePackages are the Debian packages of the registry-free image: the
// Python data stack of seed 000 (bookworm has no pyarrow package).
var ImagePackages = []string{"python3", "python3-pandas", "python3-numpy", "python3-matplotlib", "python3-seaborn",
	"python3-openpyxl", "python3-reportlab", "python3-scipy", "python3-pip", "util-linux", "ca-certificates"}

// imageRecipe versions the registry-free build; a change rebuilds.
const imageRecipe = "debootstrap-bookworm-minbase-v2"

// LabelRecipe on an image records what built it, so a build whose recipe
// is unchanged is skipped (the cache between CI runs on one machine).
const LabelRecipe = "srt-mcp.recipe"

// BuildOptions configure an image build.
type BuildOptions struct {
	Tag        string
	Dockerfile bool   // build from the Dockerfile (needs a registry)
	Mirror     string // Debian mirror for debootstrap (default: the host's apt source)
	Suite      string // default bookworm
	Force      bool   // rebuild even if the recipe is unchanged
	WorkDir    string // where the root filesystem is assembled (default a temp dir)
	Log        io.Writer
}

// KnownRecipes are the srt-mcp.recipe labels of the images this srt-mcp
// builds: the registry-free build's and the Dockerfile's.
func KnownRecipes() []string {
	return []string{RecipeHash(BuildOptions{Suite: "bookworm"}), DockerfileRecipe()}
}

// DockerfileRecipe is the srt-mcp.recipe label of the Dockerfile build.
func DockerfileRecipe() string {
	h := sha256.Sum256(dockerfile)
	return "dockerfile-" + hex.EncodeToString(h[:8])
}

// RecipeHash identifies a registry-free build.
func RecipeHash(o BuildOptions) string {
	h := sha256.Sum256([]byte(imageRecipe + "\n" + o.Suite + "\n" + strings.Join(ImagePackages, ",")))
	return hex.EncodeToString(h[:8])
}

// BuildImage builds the Python data image, registry-free by default.
func BuildImage(ctx context.Context, o BuildOptions) error {
	if o.Tag == "" {
		o.Tag = DefaultImage
	}
	if o.Suite == "" {
		o.Suite = "bookworm"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("the Docker engine is not reachable at %s (%v): start dockerd first", cli.DaemonHost(), err)
	}
	if o.Dockerfile {
		return buildFromDockerfile(ctx, cli, o)
	}
	hash := RecipeHash(o)
	if img, err := cli.ImageInspect(ctx, o.Tag); err == nil && !o.Force && img.Config != nil && img.Config.Labels[LabelRecipe] == hash {
		fmt.Fprintf(o.Log, "%s is up to date (recipe %s); --force rebuilds it\n", o.Tag, hash)
		return nil
	}
	if os.Geteuid() != 0 {
		return errors.New("the registry-free build runs debootstrap, which needs root; run it as root or use --dockerfile")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return errors.New("debootstrap is not installed: apt-get install -y debootstrap")
	}
	if o.Mirror == "" {
		o.Mirror = hostMirror()
	}
	work := o.WorkDir
	if work == "" {
		if work, err = os.MkdirTemp("", "srt-mcp-image-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	root := filepath.Join(work, "rootfs")
	_ = os.RemoveAll(root)
	fmt.Fprintf(o.Log, "debootstrap %s from %s into %s (a few minutes)\n", o.Suite, o.Mirror, root)
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "--include="+strings.Join(ImagePackages, ","), o.Suite, root, o.Mirror)
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("debootstrap: %w", err)
	}
	if err := finishRootfs(root); err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "importing %s as %s\n", root, o.Tag)
	tarCmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "-C", root, "-c", ".")
	out, err := tarCmd.StdoutPipe()
	if err != nil {
		return err
	}
	tarCmd.Stderr = o.Log
	if err := tarCmd.Start(); err != nil {
		return err
	}
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: out, SourceName: "-"}, o.Tag, client.ImageImportOptions{
		Message: "srt-mcp image build (" + imageRecipe + ")",
		Changes: []string{
			"LABEL " + LabelRecipe + "=" + hash,
			"ENV MPLBACKEND=Agg MPLCONFIGDIR=/tmp/home/.cache/matplotlib HOME=/tmp/home LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin",
			"USER 1000:1000",
			"WORKDIR /mnt/data",
			`CMD ["python3"]`,
		},
	})
	if err != nil {
		_ = tarCmd.Process.Kill()
		_ = tarCmd.Wait()
		return fmt.Errorf("docker import: %w", err)
	}
	err = drainJSON(res, o.Log)
	res.Close()
	if werr := tarCmd.Wait(); err == nil {
		err = werr
	}
	return err
}

// imageUID is the image's own unprivileged user (its default USER); srt-mcp
// runs each session's container as the session's own uid instead.
const imageUID = 1000

// finishRootfs adds the unprivileged user and /mnt/data, and drops what an
// image does not need.
func finishRootfs(root string) error {
	appendLine := func(rel, line string) error {
		f, err := os.OpenFile(filepath.Join(root, rel), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(line + "\n")
		return err
	}
	if err := appendLine("etc/passwd", "sandbox:x:1000:1000:srt-mcp sandbox:/tmp/home:/bin/sh"); err != nil {
		return err
	}
	if err := appendLine("etc/group", "sandbox:x:1000:"); err != nil {
		return err
	}
	for _, d := range []string{"mnt/data", "tmp/home"} {
		p := filepath.Join(root, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chown(p, imageUID, imageUID); err != nil {
			return err
		}
	}
	for _, d := range []string{"var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info"} {
		ents, _ := os.ReadDir(filepath.Join(root, d))
		for _, e := range ents {
			_ = os.RemoveAll(filepath.Join(root, d, e.Name()))
		}
	}
	return nil
}

// hostMirror is the Debian mirror of the host's apt sources.
func hostMirror() string {
	for _, f := range []string{"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if v, ok := strings.CutPrefix(line, "URIs:"); ok {
				for _, u := range strings.Fields(v) {
					if !strings.Contains(u, "security") {
						return u
					}
				}
			}
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "deb" && !strings.Contains(f[1], "security") {
				return f[1]
			}
		}
	}
	return "http://deb.debian.org/debian"
}

func buildFromDockerfile(ctx context.Context, cli *client.Client, o BuildOptions) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile))}); err != nil {
		return err
	}
	_, _ = tw.Write(dockerfile)
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{o.Tag}, Dockerfile: "Dockerfile", Remove: true, NoCache: o.Force,
		Labels: map[string]string{LabelRecipe: DockerfileRecipe()}})
	if err != nil {
		return fmt.Errorf("docker build: %w", err)
	}
	defer res.Body.Close()
	return drainJSON(res.Body, o.Log)
}

// drainJSON copies the engine's JSON progress stream to log as text and
// returns its error message, if any.
func drainJSON(r io.Reader, log io.Writer) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Stream, Status, Error string
			ErrorDetail           struct{ Message string } `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		switch {
		case m.Error != "":
			return errors.New(m.Error)
		case m.Stream != "":
			fmt.Fprint(log, m.Stream)
		case m.Status != "":
			fmt.Fprintln(log, m.Status)
		}
	}
}
