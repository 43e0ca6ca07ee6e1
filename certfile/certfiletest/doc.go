// Package certfiletest is for tests of certificate rotation: a throwaway
// CA that issues leaf certificates as PEM, and the three ways files get
// replaced on a node — the kubelet's symlink swap of its client
// certificate (RotateLink), the kubelet's ..data swap of a Secret or
// ConfigMap volume (WriteVolume), and a careless writer rewriting a file
// in place (WriteInPlace), whose readers may see half a file.
//
// Nothing it makes outlives a test: keys are P-256, certificates are
// valid from an hour ago, and files go where the test says (t.TempDir()).
package certfiletest
