// The one cppunit runner every suite binary links: runs all registered tests, or the ones
// named on the command line, and exits non-zero on any failure so CTest sees it.
//
// TENSO_TEST_SKIP (space-separated full test names, e.g. "CapiGpuTest::ipcInForkedChild")
// leaves those tests out and names each one it left out. Only for environments that cannot run
// a test at all (tests/cross/check-aarch64.sh under qemu-user says which and why).
#include <cppunit/CompilerOutputter.h>
#include <cppunit/TestResult.h>
#include <cppunit/TestResultCollector.h>
#include <cppunit/TextTestProgressListener.h>
#include <cppunit/extensions/TestFactoryRegistry.h>
#include <cppunit/ui/text/TestRunner.h>

#include <cstdlib>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

namespace {

// Runs the leaves under `t` that are not in `skip`, into `controller`.
void run_except(CppUnit::Test *t, const std::set<std::string> &skip, CppUnit::TestResult &controller) {
    if (skip.count(t->getName())) {
        std::cerr << "SKIPPED " << t->getName() << " (TENSO_TEST_SKIP)\n";
        return;
    }
    if (t->getChildTestCount() == 0) {
        t->run(&controller);
        return;
    }
    for (int i = 0; i < t->getChildTestCount(); ++i) run_except(t->getChildTestAt(i), skip, controller);
}

}  // namespace

int main(int argc, char **argv) {
    std::set<std::string> skip;
    if (const char *env = std::getenv("TENSO_TEST_SKIP")) {
        std::istringstream names(env);
        for (std::string n; names >> n;) skip.insert(n);
    }
    if (!skip.empty()) {
        CppUnit::Test *all = CppUnit::TestFactoryRegistry::getRegistry().makeTest();
        CppUnit::TestResult controller;
        CppUnit::TestResultCollector result;
        CppUnit::TextTestProgressListener progress;
        controller.addListener(&result);
        controller.addListener(&progress);
        bool found = true;
        if (argc < 2) {
            run_except(all, skip, controller);
        } else {
            for (int i = 1; i < argc; ++i) {
                CppUnit::Test *t = nullptr;
                try {
                    t = all->findTest(argv[i]);
                } catch (const std::invalid_argument &) {
                    std::cerr << "No test named <" << argv[i] << "> found.\n";
                    found = false;
                    continue;
                }
                run_except(t, skip, controller);
            }
        }
        std::cerr << "\n";
        CppUnit::CompilerOutputter(&result, std::cerr).write();
        delete all;
        return found && result.wasSuccessful() ? 0 : 1;
    }

    CppUnit::TextUi::TestRunner runner;
    runner.addTest(CppUnit::TestFactoryRegistry::getRegistry().makeTest());
    runner.setOutputter(new CppUnit::CompilerOutputter(&runner.result(), std::cerr));
    bool ok = true;
    if (argc < 2) {
        ok = runner.run("", false, true, false);
    } else {
        for (int i = 1; i < argc; ++i) ok = runner.run(argv[i], false, true, false) && ok;
    }
    return ok ? 0 : 1;
}
