// Package flagdocs holds one test: every flag each command's --help
// prints is in its README flag tables, and the tables name no flag the
// command lacks. It builds the real binaries from the workspace (no root,
// no test bed) and reads the READMEs:
//
//	switchyard-agent --help        ─▶ nodeagent/README.md "## Flags", README.md "## Node agent: …"
//	switchyard-controlplane --help ─▶ controlplane/README.md "## Flags", README.md "## Control plane: …" (but "### switchyardctl")
//	switchyardctl [COMMAND] --help ─▶ README.md "### switchyardctl"
//
// A flag row names its flags in backquotes in the first cell
// ("`--ca-file`, `--cert-file`", "`-o`"); other tables have none there. A
// section ends at the next heading of its level or above.
package flagdocs
