// A command line as people type it into the create form → argv, with the POSIX shell's quoting
// rules for the common cases: blanks separate words, '…' keeps everything literally, "…" keeps
// blanks (with \" \\ \$ \` escapes), and a backslash outside quotes escapes the next character.
// No expansion of any kind: the task gets exactly these words.
import type { Parsed } from "./parse";

export function splitCommand(text: string): Parsed<string[]> {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) return { error: `command: the ' at column ${i + 1} is not closed` };
      word += text.slice(i + 1, end);
      inWord = true;
      i = end;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < text.length && text[j] !== '"'; j++) {
        if (text[j] === "\\" && j + 1 < text.length && '"\\$`'.includes(text[j + 1])) j++;
        word += text[j];
      }
      if (j >= text.length) return { error: `command: the " at column ${i + 1} is not closed` };
      inWord = true;
      i = j;
    } else if (c === "\\" && i + 1 < text.length) {
      word += text[++i];
      inWord = true;
    } else if (c === " " || c === "\t" || c === "\n") {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  return { value: words };
}
