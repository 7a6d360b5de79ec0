// The files in the message box: screened, uploaded to the Files API with progress, then followed until the
// server has read them (the file's status comes pushed with the window account's files: nothing polls), put
// back from a sent message (Edit), and removed. Sent images keep their thumbnail while this window holds them.
import { useCallback, useEffect, useRef, useState } from "react";
import type { FileOut } from "../../../server/features/console/wire";
import { ApiError } from "../api/http";
import { getFile, KIND_LABEL, uploadFile } from "../files-client";
import { serverInfo, useWindow } from "../state/window-state";
import { pendingState } from "./attachment-chip";
import { hasPreview, screenAttachment } from "./attachments";
import type { Attachment, PendingAttachment } from "./types";

export const GONE_WORDS = "It is no longer on the server (deleted, or expired after 30 days); attach it again.";

/** An upload or lookup error in the chip's words. */
function uploadProblem(err: unknown): string {
  if (err instanceof ApiError && err.status === 0) return "The window could not reach its server; try again in a moment.";
  return (err as Error).message;
}

/** What a message keeps of a stored file: its metadata and id, never its bytes. */
export function sentAttachment(a: PendingAttachment & { file: FileOut }): Attachment {
  return { name: a.name, type: a.file.mime_type, size: a.size, fileId: a.file.id, kind: a.file.content_kind, tokens: a.file.status === "processed" ? a.file.token_estimate : undefined };
}

export type ReadyAttachment = PendingAttachment & { file: FileOut };

export function useAttachments(baseUrl: string | null, announce: (text: string) => void) {
  const [pending, setPending] = useState<PendingAttachment[]>([]);
  const [notice, setNotice] = useState<string | null>(null);
  const nextKey = useRef(1);
  /** Thumbnails of sent images, by file id, while this window holds the picked files (never saved). */
  const previews = useRef(new Map<string, string>());
  const files = useWindow((s) => s.files);

  const change = useCallback((key: number, patch: Partial<PendingAttachment>) => setPending((all) => all.map((a) => (a.key === key ? { ...a, ...patch } : a))), []);

  // A stored file still being read: its new status arrives with the pushed file list.
  useEffect(() => {
    if (!files) return;
    setPending((all) => {
      let changed = false;
      const next = all.map((a) => {
        const fresh = a.file && a.file.status === "uploaded" ? files.find((f) => f.id === a.file!.id) : undefined;
        if (!fresh || fresh.status === a.file!.status) return a;
        changed = true;
        return { ...a, file: fresh };
      });
      return changed ? next : all;
    });
  }, [files]);

  function announceUpload(name: string, outcome: { file?: FileOut; error?: string }) {
    if (outcome.error) announce(`${name} is not attached: ${outcome.error}`);
    else if (outcome.file?.status === "error") announce(`${name} is not attached: ${outcome.file.status_details ?? "the server could not read it"}`);
    else if (outcome.file) announce(`${name} is attached (${KIND_LABEL[outcome.file.content_kind] ?? outcome.file.content_kind}).`);
  }

  /**
   * Uploads each file; its chip shows the progress, then what the model will get or why not. A kind the model
   * cannot read is turned away at once; a credential file or one over its kind's limit is refused on its chip
   * without being uploaded.
   */
  async function attach(list: FileList | File[]) {
    const turnedAway: string[] = [];
    const uploads: Array<{ file: File; key: number }> = [];
    const added: PendingAttachment[] = [];
    for (const file of Array.from(list)) {
      const check = screenAttachment(file);
      if (check.verdict === "unreadable") {
        turnedAway.push(check.reason);
        continue;
      }
      const key = nextKey.current++;
      const type = file.type || "application/octet-stream";
      const error = check.verdict === "refused" ? check.reason : undefined;
      added.push({ key, name: file.name, type, size: file.size, previewUrl: !error && hasPreview(type) ? URL.createObjectURL(file) : null, progress: 0, error });
      if (error) announceUpload(file.name, { error });
      else uploads.push({ file, key });
    }
    setNotice(turnedAway.length ? turnedAway.join(" ") : null);
    setPending((current) => [...current, ...added]);
    await Promise.all(
      uploads.map(async ({ file, key }) => {
        try {
          // Attached as the window opens, a file waits for the server's address (as on the Files page).
          const { openaiBaseUrl } = await serverInfo();
          const stored = await uploadFile(openaiBaseUrl, file, (progress) => change(key, { progress }));
          change(key, { file: stored, progress: 1 });
          announceUpload(file.name, { file: stored });
        } catch (err) {
          change(key, { error: uploadProblem(err) });
          announceUpload(file.name, { error: uploadProblem(err) });
        }
      }),
    );
  }

  /** Frees a chip's thumbnail, unless a sent message still shows it. */
  const releasePreview = useCallback((url: string | null) => {
    if (url && ![...previews.current.values()].includes(url)) URL.revokeObjectURL(url);
  }, []);

  function remove(key: number) {
    releasePreview(pending.find((a) => a.key === key)?.previewUrl ?? null);
    setPending((all) => all.filter((a) => a.key !== key));
  }

  /** Empties the message box; `sent`: its files went with a message (their thumbnails stay with it). */
  const clear = useCallback(
    (sent: ReadyAttachment[] = []) => {
      for (const a of sent) if (a.previewUrl) previews.current.set(a.file.id, a.previewUrl);
      setPending((all) => {
        for (const a of all) releasePreview(a.previewUrl);
        return [];
      });
      setNotice(null);
    },
    [releasePreview],
  );

  /** Puts a sent message's files back in the message box (Edit), checking each is still on the server. */
  function restore(sent: Attachment[]) {
    const restored = sent.map((a): PendingAttachment => ({
      key: nextKey.current++,
      name: a.name,
      type: a.type,
      size: a.size,
      previewUrl: a.gone ? null : (previews.current.get(a.fileId) ?? null),
      progress: 1,
      ...(a.gone ? { error: GONE_WORDS } : { restoring: true }),
    }));
    setPending(restored);
    if (!baseUrl) return;
    restored.forEach((item, i) => {
      const a = sent[i]!;
      if (a.gone) return;
      getFile(baseUrl, a.fileId).then(
        (file) => change(item.key, { file, restoring: false }),
        (err: unknown) => change(item.key, { restoring: false, error: err instanceof ApiError && err.status === 404 ? GONE_WORDS : uploadProblem(err) }),
      );
    });
  }

  const uploading = pending.some((a) => pendingState(a) === "uploading");
  const ready = pending.filter((a): a is ReadyAttachment => a.file !== undefined && a.file.status !== "error" && !a.error);
  const previewOf = useCallback((fileId: string) => previews.current.get(fileId) ?? null, []);
  return { pending, ready, uploading, notice, attach, remove, clear, restore, previewOf };
}

export type Attachments = ReturnType<typeof useAttachments>;
