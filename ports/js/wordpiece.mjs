// BERT's WordPiece in JavaScript, written from the rules that bert_nb.WordPieceTokenizer sets tokenizers to follow:
// the five specials split out of the raw text first; then BertNormalizer (control characters dropped, whitespace
// made a space, CJK ideographs spaced, accents stripped by NFD, each character lower-cased on its own),
// BertPreTokenizer (split at whitespace, every punctuation character a word), and WordPiece (the longest piece of
// the vocabulary first, later pieces `##`; a word of more than 100 characters, or with no split, is [UNK]).
// node ports/js/wordpiece.mjs VOCAB CASES.json   prints the ids of each case, [CLS] ... [SEP], as a JSON list
import { readFileSync } from 'node:fs';
import { KEPT, PUNCT, DROPPED } from './skew.mjs';

export const SPECIALS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
const MAX_WORD = 100;
const CJK = [[0x4E00, 0x9FFF], [0x3400, 0x4DBF], [0x20000, 0x2A6DF], [0x2A700, 0x2B73F], [0x2B740, 0x2B81F],
             [0x2B920, 0x2CEAF], [0xF900, 0xFAFF], [0x2F800, 0x2FA1F]];  // tokenizers' is_chinese_char

const within = (table, c) => { const p = c.codePointAt(0); return table.some(([a, b]) => a <= p && p <= b); };
const isCJK = (c) => { const p = c.codePointAt(0); return CJK.some(([a, b]) => a <= p && p <= b); };
const isSpace = (c) => c === '\t' || c === '\n' || c === '\r' || /\p{White_Space}/u.test(c);
// Cc Cf Co Cs, not Cn: tokenizers keeps an unassigned character
const isControl = (c) => /[\p{Cc}\p{Cf}\p{Co}\p{Cs}]/u.test(c) && !'\t\n\r'.includes(c);
const isPunct = (c) => /[!-\/:-@\[-`{-~]/.test(c) || /\p{P}/u.test(c);  // ASCII punctuation, or Unicode's

export function normalize(text, lowercase = true) {
  let out = '';
  for (const c of text) {  // clean_text, then handle_chinese_chars
    const p = c.codePointAt(0);
    if (p === 0 || p === 0xFFFD || within(DROPPED, c) || (isControl(c) && !within(KEPT, c))) continue;
    out += isSpace(c) ? ' ' : isCJK(c) ? ` ${c} ` : c;
  }
  if (!lowercase) return out;
  // strip_accents follows lowercase: NFD, then the nonspacing marks go (those tokenizers knows as such)
  out = out.normalize('NFD').replace(/\p{Mn}/gu, (m) => within(KEPT, m) || within(PUNCT, m) ? m : '');
  return Array.from(out, (c) => c.toLowerCase()).join('');  // a character at a time, as Rust's char does
}

export function preTokenize(text) {
  const words = []; let word = '';
  for (const c of text) {
    if (isSpace(c)) { if (word) words.push(word); word = ''; }
    else if (within(PUNCT, c) || (isPunct(c) && !within(KEPT, c))) {
      if (word) words.push(word);
      words.push(c); word = '';
    }
    else word += c;
  }
  if (word) words.push(word);
  return words;
}

export class WordPiece {
  constructor(tokens, lowercase = true) {  // tokens[i] is token i; the five specials among them
    if (!Array.isArray(tokens) || tokens.some((t) => typeof t !== 'string'))
      throw new TypeError('tokens must be a list of strings');
    this.tokens = tokens; this.lowercase = lowercase; this.ids = new Map();
    tokens.forEach((t, i) => {
      if (this.ids.has(t)) throw new Error(`token ${JSON.stringify(t)} twice`);
      this.ids.set(t, i);
    });
    for (const s of SPECIALS) if (!this.ids.has(s)) throw new Error(`the vocabulary lacks ${s}`);
  }
  static fromVocabText(text) {  // vocab.txt: one token a line, the line number its id
    const lines = text.split('\n').map((l) => l.replace(/\r$/, ''));
    if (lines.length && lines[lines.length - 1] === '') lines.pop();
    return new WordPiece(lines);
  }
  pieces(word) {
    const chars = Array.from(word);
    if (chars.length > MAX_WORD) return ['[UNK]'];
    const out = [];
    for (let start = 0; start < chars.length;) {
      let end = chars.length, piece = null;
      for (; start < end; end--) {
        const sub = (start > 0 ? '##' : '') + chars.slice(start, end).join('');
        if (this.ids.has(sub)) { piece = sub; break; }
      }
      if (piece === null) return ['[UNK]'];
      out.push(piece); start = end;
    }
    return out;
  }
  tokenize(text) {  // the pieces of `text`, without [CLS] and [SEP]; a special in the text stays itself
    if (typeof text !== 'string') throw new TypeError(`text must be a string, got ${typeof text}`);
    const out = [];
    let rest = text;
    while (rest) {
      let at = -1, hit = null;
      for (const s of SPECIALS) { const i = rest.indexOf(s); if (i >= 0 && (at < 0 || i < at)) { at = i; hit = s; } }
      const plain = at < 0 ? rest : rest.slice(0, at);
      for (const w of preTokenize(normalize(plain, this.lowercase))) out.push(...this.pieces(w));
      if (at < 0) break;
      out.push(hit); rest = rest.slice(at + hit.length);
    }
    return out;
  }
  encode(text) { return ['[CLS]', ...this.tokenize(text), '[SEP]'].map((t) => this.ids.get(t)); }
}

if (globalThis.process?.argv?.[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  const [vocab, cases] = process.argv.slice(2);
  const wp = WordPiece.fromVocabText(readFileSync(vocab, 'utf8'));
  process.stdout.write(JSON.stringify(JSON.parse(readFileSync(cases, 'utf8')).map((t) => wp.encode(t))));
}
