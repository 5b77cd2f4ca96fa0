// The console's entry point: mounts the app into #app.
import { render } from "preact";

function App() {
  return <main><h1>gpupool</h1></main>;
}

render(<App />, document.getElementById("app")!);
