// Package e2e builds an e2e.test that holds only Kubernetes' storage specs.
//
// csi-mock runs one part of Kubernetes' end-to-end tests: the "External Storage"
// suites, which test a CSI driver described by a file. Upstream's test/e2e main
// links every area's specs (apps, network, node, kubectl, DRA, ...) into one
// binary. This one links the suite setup (package e2e), the storage specs and
// the framework's flags, so a cold build compiles and links less.
// docs/upstream-e2e.md says what it runs; docs/toolchain.md what it saves.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/component-base/version"
	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// Feature and label constants, frozen before specs are defined.
	_ "k8s.io/kubernetes/test/e2e/feature"

	// The specs: the suites run against a driver given by --storage.testdriver.
	_ "k8s.io/kubernetes/test/e2e/storage/external"

	// The framework's debugging, metrics and node hooks, as upstream's main sets them.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
)

func TestMain(m *testing.M) {
	showVersion := flag.CommandLine.Bool("version", false, "Print the version and exit.")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		os.Exit(0)
	}
	if flag.CommandLine.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", flag.CommandLine.Args())
		os.Exit(1)
	}
	// Manifests and fixtures the specs read are embedded; a repo root adds files on disk.
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	if framework.TestContext.RepoRoot != "" {
		testfiles.AddFileSource(testfiles.RootFileSource{Root: framework.TestContext.RepoRoot})
	}
	os.Exit(m.Run())
}

func TestE2E(t *testing.T) {
	e2e.RunE2ETests(t)
}
