// The server's log as every layer sees it: one function, a level and a line.
export type LogLevel = "debug" | "info" | "warn" | "error";

/**
 * `inWindow`: the same line in the desktop window's words, where `message` names a command or flag of the CLI
 * (the window's log shows this instead: the button or setting that does it, or nothing to act on).
 */
export type Log = (level: LogLevel, message: string, inWindow?: string) => void;
