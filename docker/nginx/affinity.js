// The conversation key nginx hashes to pick a replica (`hash $uvllm_conversation consistent`
// in nginx.conf; docker/nginx/README.md "Prefix affinity"). Requests with the same key go to
// the same replica while it is up, so that replica's prefix cache holds the conversation's
// earlier turns.
//
//   1. The client's X-Session-Id header, when it sends one: the client knows best.
//   2. Else a digest of the start of the conversation: for /v1/chat/completions the messages
//      up to and including the first user message (the system prompt and the opening
//      question, which every later turn repeats unchanged); for /v1/completions the first
//      PROMPT_CHARS characters of the prompt. Only the start: later turns append messages,
//      and the key must not change with them.
//   3. Else (no body, a body that is not JSON, a body nginx wrote to a file) the request id:
//      a random replica, since such a request has no prefix to find.
//
// Runs when the upstream is chosen, after nginx has read the whole body (proxy_pass reads
// it first), so r.requestText is there as long as the body fits client_body_buffer_size.

var PROMPT_CHARS = 2048;

function digest(text) {
    return require('crypto').createHash('md5').update(text).digest('hex');
}

// The messages that open the conversation: system/developer ones and the first user one.
function opening(messages) {
    var out = [];
    for (var i = 0; i < messages.length; i++) {
        var m = messages[i] || {};
        out.push([m.role, m.content]);
        if (m.role === 'user') break;
    }
    return out;
}

function start_of(body) {
    if (Array.isArray(body.messages) && body.messages.length)
        return 'c:' + JSON.stringify(opening(body.messages));
    var p = body.prompt;
    if (Array.isArray(p) && p.length === 1) p = p[0]; // one prompt given as a list
    if (typeof p === 'string' && p.length) return 'p:' + p.substring(0, PROMPT_CHARS);
    if (Array.isArray(p) && p.length && typeof p[0] === 'number') // token ids
        return 'p:' + JSON.stringify(p.slice(0, PROMPT_CHARS / 4));
    return null;
}

function conversation(r) {
    var sid = r.headersIn['X-Session-Id'];
    if (sid) return 's:' + sid;
    var start = null;
    try {
        var text = r.requestText;
        if (text) start = start_of(JSON.parse(text));
    } catch (e) {
        start = null; // not JSON, or the body is in a file: no key from it
    }
    return start === null ? 'r:' + r.variables.request_id : 'h:' + digest(start);
}

export default {conversation};
