package mcpserver

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// A PNG whose header claims 1,000,000 x 1,000,000 pixels (74 bytes) used
// to make the server allocate for all of them and die; it gets no preview,
// and a sane image still gets one.
func TestPreviewRefusesDecompressionBombs(t *testing.T) {
	bomb := pngHeaderOnly(1_000_000, 1_000_000)
	if len(bomb) > 100 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	if _, err := preview(bomb, 64<<10, newPreviewBudget()); err == nil {
		t.Fatal("a 10^12-pixel image was decoded")
	}
	img := image.NewRGBA(image.Rect(0, 0, 800, 600))
	for x := 0; x < 800; x++ {
		img.Set(x, x%600, color.RGBA{255, 0, 0, 255})
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	if p, err := preview(buf.Bytes(), 64<<10, newPreviewBudget()); err != nil || len(p) == 0 {
		t.Fatalf("a sane image got no preview: %v", err)
	}
}

// pngHeaderOnly is a PNG signature, an IHDR for w x h RGBA pixels, and an
// empty IEND: what a hostile run writes.
func pngHeaderOnly(w, h uint32) []byte {
	var b bytes.Buffer
	b.Write([]byte("\x89PNG\r\n\x1a\n"))
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		crc := crc32.NewIEEE()
		crc.Write([]byte(typ))
		crc.Write(data)
		_ = binary.Write(&b, binary.BigEndian, crc.Sum32())
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6 // 8-bit RGBA
	chunk("IHDR", ihdr)
	chunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
	chunk("IEND", nil)
	return b.Bytes()
}

// One reply's previews have a budget: a 16-bit image too big to decode
// (decoded bytes, not only pixels) is not previewed, and past the reply's
// count no more are.
func TestPreviewBudget(t *testing.T) {
	wide := image.NewRGBA64(image.Rect(0, 0, 3000, 3000)) // 72 MB decoded: past one image's bound
	var big bytes.Buffer
	if err := png.Encode(&big, wide); err != nil {
		t.Fatal(err)
	}
	if _, err := preview(big.Bytes(), 64<<10, newPreviewBudget()); err == nil {
		t.Fatal("a 16-bit 3000x3000 image was decoded for a preview")
	}
	var small bytes.Buffer
	if err := png.Encode(&small, image.NewRGBA(image.Rect(0, 0, 64, 64))); err != nil {
		t.Fatal(err)
	}
	b := newPreviewBudget()
	for i := 0; i < maxPreviewsPerReply; i++ {
		if _, err := preview(small.Bytes(), 64<<10, b); err != nil {
			t.Fatalf("preview %d within the budget: %v", i, err)
		}
	}
	if _, err := preview(small.Bytes(), 64<<10, b); err == nil {
		t.Fatal("a preview past the reply's count")
	}
}
