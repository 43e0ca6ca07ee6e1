// Package checkout gives e2e tests what they take from the repository
// checkout they run in: the README's marked examples and the tools that
// `make tools` installs into bin/. A missing tool skips the test, or
// fails it under CI (CI set), where `make tools` has run.
package checkout
