/*
 * hybridgw-sim: the subcommands of the simulator. Each takes the argv
 * after its name and returns the process exit status.
 */
#ifndef GW_SIM_H
#define GW_SIM_H

/* One simulated device: a firmware-faithful MQTT+UDP client. */
int gw_sim_device_main(int argc, char **argv);

/* A mock backend that behaves like the xiaozhi server. */
int gw_sim_backend_main(int argc, char **argv);

/* Many devices from one process against any MQTT endpoint. */
int gw_sim_load_main(int argc, char **argv);

#endif /* GW_SIM_H */
