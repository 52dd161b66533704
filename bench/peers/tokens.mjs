// Reads a JSON array of strings on stdin and prints a JSON array of their
// token counts in o200k_base (OpenAI's GPT-4o, GPT-4.1, GPT-5 and o-series
// encoding). Claude's tokenizer is not public; this is the nearest real
// count a bench can make offline. Used by `srt-mcp bench --costs`.
import { encode } from 'gpt-tokenizer/encoding/o200k_base'

let input = ''
for await (const chunk of process.stdin) input += chunk
const texts = JSON.parse(input)
process.stdout.write(JSON.stringify(texts.map((t) => encode(t).length)) + '\n')
