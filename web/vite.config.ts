// Vite's build of the console: JSX compiled by esbuild for Preact (no Babel), hashed asset names
// under assets/ (served with immutable caching), no inline scripts or styles (the server's
// Content-Security-Policy allows only 'self'). The output directory is given by the build
// (web/CMakeLists.txt passes --outDir inside the CMake build tree).
import { defineConfig } from "vite";

export default defineConfig({
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    target: "es2020",
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    reportCompressedSize: true,
  },
});
