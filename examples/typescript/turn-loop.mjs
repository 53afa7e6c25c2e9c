// A chat platform's turn loop on Engram, in TypeScript's runtime (plain ESM
// JavaScript, so that it runs without a build step), with a stand-in for
// the model. Against a local `engram serve`:
//
//   npm install @engram-memory/client
//   export ENGRAM_NATS_PASSWORD=$(jq -r .users.platform ~/.local/share/engram/nats-credentials.json)
//   node turn-loop.mjs "How do we deploy the web app?" "And which package manager?"
//
// ENGRAM_NATS_URL (nats://127.0.0.1:4222), ENGRAM_NATS_USER (platform) and
// ENGRAM_PROJECT (acme/web) say where and who. Every turn: ask for the
// memory block and for what to send of the earlier turns (in parallel;
// neither ever blocks the turn), build the prompt, call the model, report
// the turn and its size.
import { connect } from "@engram-memory/client";

const client = await connect({
  servers: process.env.ENGRAM_NATS_URL ?? "nats://127.0.0.1:4222",
  user: process.env.ENGRAM_NATS_USER ?? "platform",
  password: process.env.ENGRAM_NATS_PASSWORD,
});

const conversation = { project: process.env.ENGRAM_PROJECT ?? "acme/web", session: `example-${Date.now()}` };
const history = []; // the platform's own transcript: { turn, role, content }

/** The stand-in for the platform's model call. */
async function callModel(messages) {
  return `(the model's answer to "${messages.at(-1).content}", with ${messages.length} messages of context)`;
}

async function turn(turnId, userText) {
  const ref = { ...conversation, turn: turnId };
  const [injection, context] = await Promise.all([
    client.inject(ref, { text: userText }, { onMiss: (why) => console.log(`turn ${turnId}: no memory block (${why.message})`) }),
    client.context(conversation),
  ]);

  const messages = [{ role: "system", content: "You are the team's coding assistant." }];
  if (injection?.block) messages.push({ role: "system", content: injection.block });
  if (context) {
    // Engram's view of the earlier turns: the summary of the compacted
    // ones, the stored messages after it, then our own messages of the
    // turns it has not stored yet.
    if (context.block) messages.push({ role: "user", content: context.block });
    messages.push(...context.messages.map((m) => ({ role: m.role, content: m.content })));
    const stored = new Set(context.messages.map((m) => m.turn_id));
    messages.push(...history.filter((m) => !stored.has(m.turn)).map(({ role, content }) => ({ role, content })));
  } else {
    messages.push(...history.map(({ role, content }) => ({ role, content })));
  }
  messages.push({ role: "user", content: userText });

  const answer = await callModel(messages);
  history.push({ turn: turnId, role: "user", content: userText }, { turn: turnId, role: "assistant", content: answer });

  await client.publishTurnEnded(ref, {
    messages: [
      { role: "user", content: userText },
      { role: "assistant", content: answer },
    ],
    // The memories the prompt carried: their feedback survives a store
    // failover between Engram's answer and its record of it.
    injected_node_ids: injection?.nodeIds,
  });
  const tokens = Math.ceil(messages.reduce((n, m) => n + m.content.length, 0) / 4);
  await client.publishTokensReported(conversation, { input_tokens: tokens, context_window: 128_000 });

  console.log(`turn ${turnId}: ${injection ? `memory block of ${injection.nodeIds.length} memories` : "no memory block"}, ${messages.length} messages sent`);
  if (injection?.block) console.log(injection.block);
  console.log(`assistant: ${answer}`);
}

const questions = process.argv.slice(2);
if (questions.length === 0) questions.push("How do we deploy the web app?");
try {
  for (const [i, q] of questions.entries()) await turn(`t${i + 1}`, q);
} finally {
  await client.close();
}
