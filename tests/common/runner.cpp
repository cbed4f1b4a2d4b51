// The one cppunit runner every suite binary links: runs all registered tests, or the ones
// named on the command line, and exits non-zero on any failure so CTest sees it.
#include <cppunit/CompilerOutputter.h>
#include <cppunit/extensions/TestFactoryRegistry.h>
#include <cppunit/ui/text/TestRunner.h>

#include <iostream>

int main(int argc, char **argv) {
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
