// What people type into the create-task form, parsed with the CLI's rules and messages
// (core/duration.cc ParseDurationMs, cli/format.cc ParseMib, ParseGib, ParseMilli, ParseMoney).
// Each returns {value} or {error} naming what is wrong, so the form shows it beside the field.

export type Parsed<T> = { value: T; error?: undefined } | { value?: undefined; error: string };

const kUnitsMs: Array<[string, number]> = [
  ["d", 86_400_000],
  ["h", 3_600_000],
  ["m", 60_000],
  ["s", 1000],
  ["ms", 1],
];

/** "90s", "15m", "2h", "1h30m", "1d", "500ms" → milliseconds (units largest first, each once). */
export function parseDuration(text: string): Parsed<number> {
  const quoted = `'${text}'`;
  const invalid = { error: `invalid duration ${quoted}: use a number and a unit, like 90s, 15m, 2h, 1h30m or 1d` };
  let s = text.replace(/^[ \t]+|[ \t]+$/g, "");
  if (s === "") return invalid;
  let total = 0;
  let nextUnit = 0;
  while (s !== "") {
    const m = /^(\d+)([A-Za-z]*)/.exec(s);
    if (!m) return invalid;
    s = s.slice(m[0].length);
    const u = kUnitsMs.findIndex(([name]) => name === m[2].toLowerCase());
    if (u < 0) return invalid;
    if (u < nextUnit) return { error: `invalid duration ${quoted}: units go from largest to smallest, each once (like 1h30m)` };
    nextUnit = u + 1;
    total += Number(m[1]) * kUnitsMs[u][1];
    if (!Number.isSafeInteger(total)) return { error: `duration ${quoted} is too long` };
  }
  return { value: total };
}

function mibPerUnit(unit: string): number {
  const u = unit.toLowerCase();
  if (u === "") return 1;
  if (["m", "mi", "mib", "mb"].includes(u)) return 1;
  if (["g", "gi", "gib", "gb"].includes(u)) return 1024;
  if (["t", "ti", "tib", "tb"].includes(u)) return 1024 * 1024;
  return 0;
}

/** "16384", "512M", "16G", "16Gi", "1T" (binary units) → MiB. */
export function parseMib(text: string): Parsed<number> {
  const m = /^\s*(\d+)\s*([A-Za-z]*)\s*$/.exec(text);
  const per = m ? mibPerUnit(m[2]) : 0;
  if (!m || per === 0) return { error: `invalid size '${text}': use MiB or a unit, like 512M, 16G or 16Gi` };
  const v = Number(m[1]) * per;
  if (!Number.isSafeInteger(v)) return { error: `size '${text}' is too large` };
  return { value: v };
}

/** "50" (GiB) or a size with a unit ("50G", "500M") → GiB, rounded up. */
export function parseGib(text: string): Parsed<number> {
  const m = /^\s*(\d+)\s*([A-Za-z]*)\s*$/.exec(text);
  if (m && m[2] === "") return { value: Number(m[1]) };
  const mib = parseMib(text);
  if (mib.error !== undefined) return { error: mib.error.replace("MiB or a unit", "GiB or a unit") };
  return { value: Math.ceil(mib.value / 1024) };
}

/** "2", "0.5", "1.125" → milli-units. */
export function parseMilli(text: string): Parsed<number> {
  const m = /^\s*(\d+)(?:\.(\d{1,3}))?\s*$/.exec(text);
  if (!m) return { error: `invalid number '${text}': use a number with at most three decimals, like 2 or 0.5` };
  return { value: Number(m[1]) * 1000 + Number((m[2] ?? "").padEnd(3, "0") || "0") };
}

/** "12", "12.5", "0.000001" → micros (at most six decimals, no sign). */
export function parseMoney(text: string): Parsed<number> {
  const m = /^\s*(\d+)(?:\.(\d+))?\s*$/.exec(text);
  if (!m) return { error: `invalid amount '${text}': use a positive number with at most six decimals, like 100 or 12.5` };
  if ((m[2] ?? "").length > 6) return { error: `amount '${text}' has more than six decimals (the smallest unit is 0.000001)` };
  const v = Number(m[1]) * 1_000_000 + Number((m[2] ?? "").padEnd(6, "0") || "0");
  if (!Number.isSafeInteger(v)) return { error: `amount '${text}' is too large` };
  return { value: v };
}

/** An integer within [min, max]; the message names `what`. */
export function parseInteger(what: string, text: string, min: number, max: number): Parsed<number> {
  const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in ${min}..${max}`;
  const t = text.trim();
  const v = Number(t);
  if (!/^-?\d+$/.test(t) || !Number.isSafeInteger(v) || v < min || v > max) {
    return { error: `${what} must be an integer ${range}, got '${text}'` };
  }
  return { value: v };
}
