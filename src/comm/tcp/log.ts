/** Where the tcp transport reports dropped connections, failures and progress. */
export type TcpLogLevel = 'debug' | 'info' | 'warn' | 'error';
export type TcpLog = (level: TcpLogLevel, message: string) => void;

/** The default: warnings and errors to stderr, one line each, prefixed with the rank (or its name: `process 1`). */
export function stderrLog(rank: number | string): TcpLog {
  const who = typeof rank === 'number' ? `rank ${rank}` : rank;
  return (level, message) => {
    if (level === 'warn' || level === 'error') process.stderr.write(`[paratrain tcp ${who}] ${level}: ${message}\n`);
  };
}

/**
 * Caps the lines one source can log (a port scanner must not flood the job's log): after
 * `max` warnings, one line says further ones are counted, not printed.
 */
export function cappedWarnings(log: TcpLog, max = 100): TcpLog {
  let warned = 0;
  return (level, message) => {
    if (level !== 'warn') return log(level, message);
    warned++;
    if (warned <= max) log(level, message);
    else if (warned === max + 1) log(level, `more than ${max} warnings: further dropped connections are not logged`);
  };
}
