// The first run: no model anywhere yet, so offer the recommended one, a small one that also sees images, or a
// pick on the Model page. Shown in the empty chat, where the newcomer looks; the download's progress and
// "ready" follow in the same place.
import { useState } from "react";
import type { FirstRunView } from "../../server/features/console/contract";
import { consoleApi } from "./console-client";
import { formatBytes } from "./format";
import { Download } from "./icons";

export function FirstRunPanel({ offer, onChoose }: { offer: FirstRunView; onChoose: () => void }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const { recommended, vision } = offer;
  const download = (source: string) => {
    setBusy(true);
    setError(null);
    // Its progress comes pushed (state/window-state.ts).
    consoleApi.startDownload({ source }).then(undefined, (err: Error) => {
      setError(err.message);
      setBusy(false);
    });
  };
  return (
    <div className="card first-run" data-testid="first-run">
      <h2>Get a model to start</h2>
      <p>
        svc runs a language model on this computer; none is here yet. The recommended one is <strong>{recommended.title}</strong>:{" "}
        {recommended.description}
      </p>
      <div className="form-row">
        <button className="primary" data-testid="first-run-download" disabled={busy} onClick={() => download(recommended.source)}>
          <Download size={15} aria-hidden /> Download {recommended.title} ({formatBytes(recommended.approxBytes)})
        </button>
        <button data-testid="first-run-choose" onClick={onChoose}>
          Choose another model
        </button>
      </div>
      {vision && (
        <p className="first-run-vision" data-testid="first-run-vision">
          Or one that also sees images: <strong>{vision.title}</strong>. {vision.description}{" "}
          <button data-testid="first-run-download-vision" disabled={busy} onClick={() => download(vision.source)}>
            <Download size={15} aria-hidden /> Download {vision.title} ({formatBytes(vision.approxBytes)})
          </button>
        </p>
      )}
      {error && (
        <p className="error" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}
