// The first run: no model anywhere yet, so offer the recommended one (or a pick on the Model page). Shown in
// the empty chat, where the newcomer looks; the download's progress and "ready" follow in the same place.
import { useState } from "react";
import type { FirstRunView } from "../../server/features/console/contract";
import { consoleApi } from "./console-client";
import { formatBytes } from "./format";
import { Download } from "./icons";

export function FirstRunPanel({ offer, onChoose }: { offer: FirstRunView; onChoose: () => void }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const { recommended } = offer;
  return (
    <div className="card first-run" data-testid="first-run">
      <h2>Get a model to start</h2>
      <p>
        svc runs a language model on this computer; none is here yet. The recommended one is <strong>{recommended.title}</strong>:{" "}
        {recommended.description}
      </p>
      <div className="form-row">
        <button
          className="primary"
          data-testid="first-run-download"
          disabled={busy}
          onClick={() => {
            setBusy(true);
            setError(null);
            // Its progress comes pushed (state/window-state.ts).
            consoleApi.startDownload({ source: recommended.source }).then(undefined, (err: Error) => {
              setError(err.message);
              setBusy(false);
            });
          }}
        >
          <Download size={15} aria-hidden /> Download {recommended.title} ({formatBytes(recommended.approxBytes)})
        </button>
        <button data-testid="first-run-choose" onClick={onChoose}>
          Choose another model
        </button>
      </div>
      {error && (
        <p className="error" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}
