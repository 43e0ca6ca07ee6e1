package images

import "testing"

// The config digest is read back from an archive writeArchive made.
func TestArchiveImageID(t *testing.T) {
	work := t.TempDir()
	s := imageSpec{name: Busybox, ref: BusyboxRef, layers: []layerSpec{{entries: []Entry{File("hello", 0o644, []byte("hi"))}}}}
	img, err := s.image(work)
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	a := Archive{Name: Busybox, Path: work + "/a.tar"}
	if a.Digest, err = s.writeArchive(work, a.Path); err != nil {
		t.Fatal(err)
	}
	got, err := a.ImageID()
	if err != nil {
		t.Fatal(err)
	}
	if got != want.String() {
		t.Errorf("ImageID() = %s, want the config digest %s", got, want)
	}
	if a.Digest == got {
		t.Errorf("the config digest equals the manifest digest %s", got)
	}
	if _, err := (Archive{Path: a.Path, Digest: "sha256:00"}).ImageID(); err == nil {
		t.Error("ImageID() of a digest not in the archive: no error")
	}
}
