// Model weights in anonymous memory and transparent huge pages, on Linux when the model runs on the CPU.
//
// Decoding one token reads every weight once, so on a CPU it is bound by how fast memory streams. Weights
// in a file mapping (node-llama-cpp's and llama-server's default) sit in 4 KiB pages; read into the
// process's own memory and collapsed into 2 MiB pages, the same decode ran 20 to 45% faster here
// (docs/performance.md, section 18). Linux only: that is where transparent huge pages exist, and where a
// process can ask for them (madvise) on memory it already holds.
import { readFileSync } from "node:fs";
import { memoryBudget } from "./resource-plan.js";

export const HUGE_PAGE_BYTES = 2 * 1024 * 1024;
const HUGE = BigInt(HUGE_PAGE_BYTES);
const MADV_HUGEPAGE = 14;
const MADV_COLLAPSE = 25;

/** How the model's weights are held: mapped from the file, or read into the process's memory. */
export type WeightsSetting = "auto" | "on" | "off";

export function parseMmapSetting(value: string | undefined): WeightsSetting | undefined {
  const v = (value ?? "").trim().toLowerCase();
  if (v === "") return undefined;
  if (v === "auto") return "auto";
  if (["on", "1", "true", "yes"].includes(v)) return "on";
  if (["off", "0", "false", "no"].includes(v)) return "off";
  return undefined;
}

/**
 * Whether to map the model file (true) or read it into memory (false). `auto` reads it in only where huge
 * pages are what it gains (Linux with transparent huge pages, `always` or `madvise`), on the CPU, and when
 * it takes at most 80% of the memory left after the reserve the context planner keeps: a model read into
 * memory cannot be paged back to its file, so one that does not fit would end in the kernel's
 * out-of-memory killer rather than in slow paging.
 */
export function useMmapFor(input: {
  setting: WeightsSetting;
  platform: NodeJS.Platform;
  /** transparentHugePageMode() */
  hugePages: "always" | "madvise" | "never" | undefined;
  onCpu: boolean;
  modelBytes: number;
  ramFreeBytes: number;
  ramTotalBytes: number;
}): boolean {
  if (input.setting === "on") return true;
  if (input.setting === "off") return false;
  if (input.platform !== "linux" || !input.onCpu || (input.hugePages !== "always" && input.hugePages !== "madvise")) return true;
  const left = memoryBudget({ onGpu: false, vramFreeBytes: 0, vramTotalBytes: 0, ramFreeBytes: input.ramFreeBytes, ramTotalBytes: input.ramTotalBytes, mappedModelBytes: 0 });
  return input.modelBytes > 0.8 * left;
}

/**
 * The RAM this process can fill: the machine's, or a container's memory limit where that is lower (a model
 * read in is charged to the container, and going past its limit ends the process, not paging).
 */
export function ramForWeights(input: { freeBytes: number; totalBytes: number; limitBytes: number | undefined; rssBytes: number }): {
  freeBytes: number;
  totalBytes: number;
} {
  const limit = input.limitBytes;
  if (limit === undefined || !(limit > 0) || limit >= input.totalBytes) return { freeBytes: input.freeBytes, totalBytes: input.totalBytes };
  return { freeBytes: Math.max(0, Math.min(input.freeBytes, limit - input.rssBytes)), totalBytes: limit };
}

export interface Region {
  start: bigint;
  end: bigint;
}

/** The private, writable, anonymous mappings in the text of /proc/PID/maps (not the heap or stacks). */
export function anonymousRegions(maps: string): Region[] {
  const out: Region[] = [];
  for (const line of maps.split("\n")) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (!m || m[3] !== "rw-p" || m[4] !== "0" || m[5] !== "") continue;
    out.push({ start: BigInt(`0x${m[1]}`), end: BigInt(`0x${m[2]}`) });
  }
  return out;
}

/**
 * The whole huge pages inside the regions that are in `after` but not in `before` and hold at least
 * `minBytes`: the buffers a load allocated.
 */
export function addedHugeSpans(before: Region[], after: Region[], minBytes: number): Region[] {
  const known = new Set(before.map((r) => `${r.start}-${r.end}`));
  const out: Region[] = [];
  for (const r of after) {
    if (known.has(`${r.start}-${r.end}`) || r.end - r.start < BigInt(minBytes)) continue;
    const start = ((r.start + HUGE - 1n) / HUGE) * HUGE;
    const end = (r.end / HUGE) * HUGE;
    if (end > start) out.push({ start, end });
  }
  return out;
}

/** The system's transparent huge page mode, or undefined where there is none (not Linux, or no THP). */
export function transparentHugePageMode(read = (p: string) => readFileSync(p, "utf8")): "always" | "madvise" | "never" | undefined {
  try {
    const m = /\[(always|madvise|never)\]/.exec(read("/sys/kernel/mm/transparent_hugepage/enabled"));
    return (m?.[1] as "always" | "madvise" | "never" | undefined) ?? undefined;
  } catch {
    return undefined;
  }
}

/** madvise(2): 0 on success, -1 on failure. */
export type Madvise = (start: bigint, length: bigint, advice: number) => number | Promise<number>;

/**
 * libc's madvise through koffi (a dependency that ships prebuilt), or undefined where it cannot load. Called
 * on a worker thread (koffi's async calls): collapsing a model of gigabytes into huge pages takes seconds,
 * which would otherwise stall every stream of a server that switches models while it serves.
 */
export async function loadMadvise(): Promise<Madvise | undefined> {
  if (process.platform !== "linux") return undefined;
  try {
    const koffi = (await import("koffi")).default;
    const fn = koffi.load("libc.so.6").func("int madvise(uintptr_t addr, size_t len, int advice)");
    return (start, length, advice) =>
      new Promise<number>((resolve) => fn.async(start, length, advice, (err: unknown, result: number) => resolve(err ? -1 : result)));
  } catch {
    return undefined;
  }
}

/**
 * Asks for the spans to be in huge pages: MADV_HUGEPAGE, then MADV_COLLAPSE (Linux 6.1 and later), which
 * moves the pages already there into huge pages at once instead of leaving it to khugepaged. Collapsed one
 * huge page at a time, so that a page another thread frees meanwhile, or one the kernel cannot find memory
 * for, costs only itself. Returns the bytes collapsed; 0 where the kernel only took the advice.
 */
export async function adviseHugePages(spans: Region[], madvise: Madvise): Promise<number> {
  let collapsed = 0;
  for (const s of spans) {
    if ((await madvise(s.start, s.end - s.start, MADV_HUGEPAGE)) !== 0) continue;
    for (let page = s.start; page < s.end; page += HUGE) if ((await madvise(page, HUGE, MADV_COLLAPSE)) === 0) collapsed += HUGE_PAGE_BYTES;
  }
  return collapsed;
}

/**
 * Runs `allocate` (a model read into memory) and puts the buffers of `minBytes` or more it allocated in
 * huge pages. Does nothing but the allocation where the system has no transparent huge pages (`mode`, from
 * transparentHugePageMode) or madvise cannot be called.
 */
export async function intoHugePages<T>(
  allocate: () => Promise<T>,
  minBytes: number,
  mode: ReturnType<typeof transparentHugePageMode>,
): Promise<{ result: T; hugePageBytes: number }> {
  const madvise = mode === "always" || mode === "madvise" ? await loadMadvise() : undefined;
  const maps = () => anonymousRegions(readFileSync("/proc/self/maps", "utf8"));
  const before = madvise ? maps() : [];
  const result = await allocate();
  if (!madvise) return { result, hugePageBytes: 0 };
  const spans = addedHugeSpans(before, maps(), Math.max(8 * HUGE_PAGE_BYTES, minBytes));
  return { result, hugePageBytes: await adviseHugePages(spans, madvise) };
}
