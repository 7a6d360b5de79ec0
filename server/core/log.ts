// The server's log as every layer sees it: one function, a level and a line.
export type LogLevel = "debug" | "info" | "warn" | "error";

export type Log = (level: LogLevel, message: string) => void;
