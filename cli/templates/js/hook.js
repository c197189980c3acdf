// {{name}}: denies shell commands that contain a phrase of `[config] blocked`.
// Built by ./build.sh (componentize-js) into {{snake}}.wasm; tested by
// `palisade test . cases.jsonl`.

import { config, log } from "palisade:hooks/host@0.1.0";

export const preTool = {
  onPreTool(call) {
    // `[config] blocked`, as JSON (undefined when the key is absent).
    const raw = config("blocked");
    const blocked = raw === undefined ? [] : JSON.parse(raw);
    const command = JSON.parse(call.arguments).command ?? "";
    for (const phrase of blocked) {
      if (command.includes(phrase)) {
        log("info", `denied ${call.name}: contains ${JSON.stringify(phrase)}`);
        return {
          tag: "deny",
          val: {
            reasonCode: "blocked-command",
            message: `Refused: the command contains "${phrase}", which this project blocks. ` +
              "Find another way, or ask the user.",
          },
        };
      }
    }
    return { tag: "allow" };
  },
};
