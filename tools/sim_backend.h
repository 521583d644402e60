/*
 * hybridgw-sim backend: limits and file formats of the mock xiaozhi server
 * that tests and benchmarks rely on (tools/README.md, "## backend").
 */
#ifndef GW_SIM_BACKEND_H
#define GW_SIM_BACKEND_H

/* What the mock says in its hello reply and encodes its TTS audio as. */
#define GW_SIM_BACKEND_TTS_RATE     24000 /* Hz, mono */
#define GW_SIM_BACKEND_FRAME_MS     60    /* one Opus packet per frame */
#define GW_SIM_BACKEND_PREBUFFER    5     /* frames sent at once per turn */
#define GW_SIM_BACKEND_MAX_TTS      1000  /* --tts-frames limit */
#define GW_SIM_BACKEND_MAX_MESSAGE  65536 /* larger messages close (1009) */
#define GW_SIM_BACKEND_MAX_MCP_CALL 8     /* --mcp-call may be repeated */

/*
 * The vision capability the mock's MCP initialize carries, so a test can
 * check it reaches the device verbatim (the gateway must not swallow it).
 */
#define GW_SIM_BACKEND_VISION_URL   "http://127.0.0.1:8003/mcp/vision/explain"
#define GW_SIM_BACKEND_VISION_TOKEN "mock-vision-token"

#endif /* GW_SIM_BACKEND_H */
