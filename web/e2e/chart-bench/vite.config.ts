// Builds the chart bench page (index.html, main.tsx) with the console's own Vite settings, from
// this directory, with relative asset paths (budgets.test.mjs serves it from the build tree).
import { mergeConfig } from "vite";
import console from "../../vite.config";

export default mergeConfig(console, { root: __dirname, base: "./" });
