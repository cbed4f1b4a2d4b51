// The module's one JavaScript import (entry.cpp, tenso_js_piece): sdk/js/src/engine.js provides
// it at instantiation as tenso.piece. Declared here so that emscripten's link accepts it.
mergeInto(LibraryManager.library, {
  piece: function () {},
});
