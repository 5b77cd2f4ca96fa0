// The console's entry point: loads the styles and mounts the app into #app.
import { render } from "preact";
import { App } from "./app";
import "./styles/app.css";

render(<App />, document.getElementById("app")!);
