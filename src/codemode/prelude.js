// The globals a codemode script sees, made in each script's fresh runtime.
// This is one function expression: the engine calls it with `host`, its
// native functions, which stay in this closure and are never reachable from
// the script. It defines the globals as frozen, non-writable properties and
// returns what the engine itself calls: `deliver` (a call's outcome) and
// `finish` (the script's value as text).
(function (host) {
  "use strict";
  const { freeze, defineProperty, create } = Object;
  const { parse, stringify } = JSON;
  const pending = new Map();

  // Error.prepareStackTrace would run the script's own code whenever an
  // error is made, the engine's native calls included, and would hand it
  // the functions of every frame (CallSite.getFunction): locked to nothing.
  defineProperty(Error, "prepareStackTrace", {
    get() {
      return undefined;
    },
    set(value) {},
    configurable: false,
  });

  // A call's outcome: its result as JSON, or a failure `{message, kind,
  // call}` that rejects with the Error made where the script made the call,
  // so that its stack points at the script's line.
  function deliver(id, ok, payload) {
    const waiter = pending.get(id);
    if (waiter === undefined) return;
    pending.delete(id);
    if (ok) {
      waiter.resolve(parse(payload));
      return;
    }
    const failure = parse(payload);
    const error = waiter.site;
    error.message = failure.message;
    defineProperty(error, "kind", { value: failure.kind });
    defineProperty(error, "call", { value: failure.call });
    waiter.reject(error);
  }

  // The engine takes the call (a number, its id) or turns it back at once
  // ([kind, message]: over the calls limit, arguments too big or not JSON).
  function request(kind, name, argumentsText, site) {
    return new Promise(function (resolve, reject) {
      const id = host.request(kind, name, argumentsText);
      if (typeof id !== "number") {
        site.message = id[1];
        defineProperty(site, "kind", { value: id[0] });
        reject(site);
        return;
      }
      pending.set(id, { resolve, reject, site });
    });
  }

  function refuse(site, message) {
    site.message = message;
    defineProperty(site, "kind", { value: "tool failed" });
    return Promise.reject(site);
  }

  function callTool(name, args) {
    const site = new Error("");
    if (args === undefined) args = {};
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      return refuse(site, name + ": the arguments must be an object, like { text: \"hi\" }");
    }
    let text;
    try {
      text = stringify(args);
    } catch (error) {
      return refuse(site, name + ": the arguments cannot be sent as JSON: " + error.message);
    }
    return request("tool", name, text, site);
  }

  const named = create(null);
  for (const name of parse(host.toolNames())) {
    named[name] = freeze(function (args) {
      return callTool(name, args);
    });
  }
  freeze(named);
  // Any other name is a call the engine answers with "no tool named …" and
  // the closest name, rather than "not a function"; but for the names that
  // JavaScript itself looks for on an object (`await tools` must not take
  // `tools` for a promise).
  const notTools = create(null);
  for (const name of ["then", "catch", "finally", "toJSON", "toString", "valueOf", "constructor",
    "prototype", "length", "name", "inspect", "asymmetricMatch", "nodeType", "$$typeof",
    "__proto__"]) {
    notTools[name] = true;
  }
  const tools = new Proxy(named, {
    get(target, name) {
      if (typeof name !== "string") return undefined;
      if (name in target) return target[name];
      if (notTools[name] === true) return undefined;
      return function (args) {
        return callTool(name, args);
      };
    },
    set() {
      return false;
    },
    defineProperty() {
      return false;
    },
    deleteProperty() {
      return false;
    },
  });

  function describeNamespace(namespace) {
    return freezeDeep(parse(host.describe(String(namespace))));
  }

  function searchTools(query, options) {
    const given = options === undefined || options === null ? {} : options;
    return freezeDeep(parse(host.search(String(query === undefined ? "" : query), stringify(given))));
  }

  let allTools;
  function getAllTools() {
    if (allTools === undefined) allTools = freezeDeep(parse(host.allTools()));
    return allTools;
  }

  function listResources(options) {
    const site = new Error("");
    const server = options && options.server !== undefined ? String(options.server) : "";
    return request("list", server, "{}", site);
  }

  function readResource(server, uri) {
    const site = new Error("");
    if (typeof server !== "string" || typeof uri !== "string") {
      return refuse(site, "readResource(server, uri) takes two strings");
    }
    return request("read", server, stringify({ uri }), site);
  }

  function image(block) {
    if (block === null || typeof block !== "object" || block.type !== "image" ||
        typeof block.data !== "string" || typeof block.mimeType !== "string") {
      throw new TypeError("image() takes an image content block: { type: \"image\", data, mimeType }");
    }
    host.image(stringify({ type: "image", data: block.data, mimeType: block.mimeType }));
  }

  function show(value) {
    if (typeof value === "string") return value;
    if (value instanceof Error) return String(value);
    if (value === undefined || typeof value === "function" || typeof value === "symbol") {
      return String(value);
    }
    try {
      const text = stringify(value);
      return text === undefined ? String(value) : text;
    } catch (error) {
      return String(value);
    }
  }

  function logger(level) {
    return freeze(function (...values) {
      host.log(level, values.map(show).join(" "));
    });
  }

  const console = freeze({
    log: logger("log"),
    info: logger("info"),
    warn: logger("warn"),
    error: logger("error"),
    debug: logger("debug"),
  });

  function freezeDeep(value) {
    if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
      freeze(value);
      for (const key of Object.keys(value)) freezeDeep(value[key]);
    }
    return value;
  }

  const globals = {
    tools,
    describeNamespace: freeze(describeNamespace),
    searchTools: freeze(searchTools),
    listResources: freeze(listResources),
    readResource: freeze(readResource),
    image: freeze(image),
    console,
  };
  for (const name of Object.keys(globals)) {
    defineProperty(globalThis, name, { value: globals[name], writable: false, configurable: false });
  }
  defineProperty(globalThis, "ALL_TOOLS", { get: getAllTools, configurable: false });

  // The script's value as [kind, text]: a string as is, anything else as
  // JSON, nothing for `undefined` (and for a function or a symbol, which
  // JSON cannot hold), an error for a value JSON cannot write (a cycle).
  function finish(value) {
    if (typeof value === "string") return ["string", value];
    if (value === undefined) return ["none", ""];
    try {
      const text = stringify(value);
      return text === undefined ? ["none", ""] : ["json", text];
    } catch (error) {
      return ["error", "the value returned cannot be written as JSON: " + error.message];
    }
  }

  return [deliver, finish];
})
