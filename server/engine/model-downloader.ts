// Downloads model files through node-llama-cpp's downloader (ipull underneath): hf: URIs and http(s) URLs,
// split models, parallel ranged connections. An unfinished file is kept as "<name>.ipull" with its progress
// written after the data, so the next download of the same file into the same folder resumes where it stopped.
import { createModelDownloader, type ModelDownloader } from "node-llama-cpp";

/** The suffix of an unfinished download (ipull's progress file). */
export const PARTIAL_DOWNLOAD_SUFFIX = ".ipull";

export interface DownloadProgress {
  downloadedBytes: number;
  /** 0 while the server has not said. */
  totalBytes: number;
  /** Average over the last seconds; 0 before there is one. */
  bytesPerSecond: number;
  /** null while unknown. */
  etaSeconds: number | null;
}

export interface DownloadFile {
  fileName: string;
  path: string;
  /** As announced by the server (Content-Length); 0 when it did not say. */
  totalBytes: number;
}

export interface ModelDownload {
  /** The file to load (the first part of a split model). */
  readonly fileName: string;
  readonly files: DownloadFile[];
  readonly totalBytes: number;
  readonly downloadedBytes: number;
  /** Resolves when every file is complete; rejects with the signal's reason when aborted. */
  download(signal?: AbortSignal): Promise<void>;
  /** Stops, keeping what was downloaded for a later resume. */
  cancel(): Promise<void>;
}

class LibraryModelDownload implements ModelDownload {
  constructor(private readonly downloader: ModelDownloader) {}

  get fileName(): string {
    return this.downloader.entrypointFilename;
  }

  get files(): DownloadFile[] {
    return this.downloader.filesInfo.map((f) => ({ fileName: f.fileName, path: f.filePath, totalBytes: f.totalSize }));
  }

  get totalBytes(): number {
    return this.downloader.totalSize;
  }

  get downloadedBytes(): number {
    return this.downloader.downloadedSize;
  }

  async download(signal?: AbortSignal): Promise<void> {
    await this.downloader.download({ signal });
  }

  cancel(): Promise<void> {
    return this.downloader.cancel({ deleteTempFile: false });
  }
}

/**
 * Resolves the source (an hf: URI asks Hugging Face which file it names) and opens the download into
 * `directory`; nothing is transferred until download() is called. Errors are the library's: network
 * failures carry their code in `cause`, HTTP failures a `statusCode`.
 */
export async function openModelDownload(options: {
  source: string;
  directory: string;
  onProgress?: (progress: DownloadProgress) => void;
}): Promise<ModelDownload> {
  const downloader = await createModelDownloader({
    modelUri: options.source,
    dirPath: options.directory,
    // A finished file of the announced size in `directory` is taken as it is (then verified by the caller).
    skipExisting: true,
    deleteTempFileOnCancel: false,
    showCliProgress: false,
    onProgress: options.onProgress
      ? (status) =>
          options.onProgress!({
            downloadedBytes: status.downloadedSize,
            totalBytes: status.totalSize,
            bytesPerSecond: Number.isFinite(status.averageSpeed) ? status.averageSpeed : 0,
            etaSeconds: Number.isFinite(status.estimatedTimeLeft) && status.averageSpeed > 0 ? status.estimatedTimeLeft / 1000 : null,
          })
      : undefined,
  });
  return new LibraryModelDownload(downloader);
}

/**
 * How much of an unfinished download is really kept: the bytes of its finished pieces, read from the
 * progress record ipull writes after the data. The file itself is as long as the whole model from the
 * first write, so its size says nothing; pieces still arriving when a download stops are fetched again.
 * 0 when there is no record yet (nothing kept). Single-part files (one .ipull per file).
 */
export async function keptBytesOfPartial(path: string): Promise<{ keptBytes: number; totalBytes: number | null }> {
  const { open } = await import("node:fs/promises");
  let handle;
  try {
    handle = await open(path, "r");
  } catch {
    return { keptBytes: 0, totalBytes: null };
  }
  try {
    const { size } = await handle.stat();
    const tail = Math.min(size, 256 * 1024);
    const buffer = Buffer.alloc(tail);
    await handle.read(buffer, 0, tail, size - tail);
    const text = buffer.toString("latin1");
    const at = text.lastIndexOf('{"part":');
    if (at === -1) return { keptBytes: 0, totalBytes: null };
    let record: { part?: number; chunks?: number[]; chunkSize?: number };
    try {
      record = JSON.parse(text.slice(at)) as typeof record;
    } catch {
      return { keptBytes: 0, totalBytes: null };
    }
    const totalBytes = size - (tail - at);
    const chunkSize = record.chunkSize ?? 0;
    // Piece i covers [i * chunkSize, (i + 1) * chunkSize); the last one is shorter.
    let keptBytes = 0;
    (record.chunks ?? []).forEach((status, i) => {
      if (status === CHUNK_COMPLETE) keptBytes += Math.max(0, Math.min(chunkSize, totalBytes - i * chunkSize));
    });
    return { keptBytes, totalBytes };
  } finally {
    await handle.close();
  }
}

/** ipull's ChunkStatus.COMPLETE. */
const CHUNK_COMPLETE = 2;
