/** A one-line progress bar on a TTY stream; silent elsewhere (pipes, CI logs). */
export function progressBar(stream: NodeJS.WriteStream = process.stderr) {
  const tty = stream.isTTY === true;
  let last = "";
  return {
    update(label: string, done: number) {
      if (!tty) return;
      const width = 30;
      const filled = Math.round(Math.max(0, Math.min(1, done)) * width);
      const line = `  ${label.padEnd(28)} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${Math.round(done * 100)}%`;
      if (line === last) return;
      last = line;
      stream.write(`\r${line}`);
    },
    done() {
      if (tty && last) stream.write(`\r${" ".repeat(last.length)}\r`);
      last = "";
    },
  };
}
