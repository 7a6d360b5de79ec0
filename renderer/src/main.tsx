import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./app";
import { startWindowFeed } from "./state/window-state";
import "./styles.css";

// What the window shows of the server comes pushed from here on (one stream for the whole window).
startWindowFeed();

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
