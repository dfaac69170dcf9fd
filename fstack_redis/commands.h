/* commands.h - every command handler; the table itself is data in commands.c. */
#ifndef IR_COMMANDS_H
#define IR_COMMANDS_H

#include "server.h"

/* connection and server (commands.c) */
void pingCommand(client *c);
void echoCommand(client *c);
void quitCommand(client *c);
void selectCommand(client *c);
void authCommand(client *c);
void helloCommand(client *c);
void clientCommand(client *c);
void commandCommand(client *c);
void configCommand(client *c);
void clusterCommand(client *c);
void infoCommand(client *c);
void shutdownCommand(client *c);
void timeCommand(client *c);
void roleCommand(client *c);
void monitorCommand(client *c);
void resetCommand(client *c);
/* CLIENT SETNAME and HELLO ... SETNAME: validate (Redis's rule and error) and
 * set; -1 after replying the error. */
int clientSetName(client *c, const ir_arg *a);
/* Redis's memory values: "100mb", "1gb", "4096" (CONFIG SET). 1 if valid. */
int ir_parse_memory(const char *p, size_t len, unsigned long long *out);

/* bitmaps (t_bitops.c) */
void setbitCommand(client *c);
void getbitCommand(client *c);
void bitcountCommand(client *c);
void bitposCommand(client *c);
void bitopCommand(client *c);
void bitfieldCommand(client *c);
void bitfieldroCommand(client *c);

/* HyperLogLog (t_hll.c) */
void pfaddCommand(client *c);
void pfcountCommand(client *c);
void pfmergeCommand(client *c);
void pfdebugCommand(client *c);
void pfselftestCommand(client *c);

/* keyspace (db.c) */
void dbsizeCommand(client *c);
void flushdbCommand(client *c);
void flushallCommand(client *c);
void delCommand(client *c);
void existsCommand(client *c);
void expireCommand(client *c);
void pexpireCommand(client *c);
void ttlCommand(client *c);
void pttlCommand(client *c);
void persistCommand(client *c);
void typeCommand(client *c);
void keysCommand(client *c);
void unlinkCommand(client *c);
void touchCommand(client *c);
void expireatCommand(client *c);
void pexpireatCommand(client *c);
void expiretimeCommand(client *c);
void pexpiretimeCommand(client *c);
void renameCommand(client *c);
void renamenxCommand(client *c);
void copyCommand(client *c);
void moveCommand(client *c);
void swapdbCommand(client *c);
void randomkeyCommand(client *c);
void scanCommand(client *c);
void objectCommand(client *c);

/* strings (t_string.c) */
void getCommand(client *c);
void setCommand(client *c);
void mgetCommand(client *c);
void msetCommand(client *c);
void incrCommand(client *c);
void decrCommand(client *c);
void incrbyCommand(client *c);
void decrbyCommand(client *c);
void strlenCommand(client *c);
void getexCommand(client *c);
void setexCommand(client *c);
void psetexCommand(client *c);
void setnxCommand(client *c);
void getsetCommand(client *c);
void getdelCommand(client *c);
void appendCommand(client *c);
void getrangeCommand(client *c);
void setrangeCommand(client *c);
void msetnxCommand(client *c);
void incrbyfloatCommand(client *c);
void lcsCommand(client *c);
void dumpCommand(client *c); /* dump.c */
void restoreCommand(client *c);
void sortCommand(client *c); /* sort.c */
void sortroCommand(client *c);

/* hashes (t_hash.c) */
void hsetCommand(client *c);
void hmsetCommand(client *c);
void hsetnxCommand(client *c);
void hgetCommand(client *c);
void hmgetCommand(client *c);
void hdelCommand(client *c);
void hlenCommand(client *c);
void hexistsCommand(client *c);
void hstrlenCommand(client *c);
void hgetallCommand(client *c);
void hkeysCommand(client *c);
void hvalsCommand(client *c);
void hincrbyCommand(client *c);
void hincrbyfloatCommand(client *c);
void hrandfieldCommand(client *c);
void hscanCommand(client *c);

/* sets (t_set.c) */
void saddCommand(client *c);
void sremCommand(client *c);
void smembersCommand(client *c);
void sismemberCommand(client *c);
void smismemberCommand(client *c);
void scardCommand(client *c);
void spopCommand(client *c);
void srandmemberCommand(client *c);
void smoveCommand(client *c);
void sinterCommand(client *c);
void sintercardCommand(client *c);
void geoaddCommand(client *c);
void geodistCommand(client *c);
void geohashCommand(client *c);
void geoposCommand(client *c);
void georadiusCommand(client *c);
void georadiusbymemberCommand(client *c);
void georadiusroCommand(client *c);
void georadiusbymemberroCommand(client *c);
void geosearchCommand(client *c);
void geosearchstoreCommand(client *c);
void zaddCommand(client *c);
void zincrbyCommand(client *c);
void zremCommand(client *c);
void zremrangebyscoreCommand(client *c);
void zremrangebyrankCommand(client *c);
void zremrangebylexCommand(client *c);
void zunionstoreCommand(client *c);
void zinterstoreCommand(client *c);
void zdiffstoreCommand(client *c);
void zunionCommand(client *c);
void zinterCommand(client *c);
void zintercardCommand(client *c);
void zdiffCommand(client *c);
void zrangeCommand(client *c);
void zrangestoreCommand(client *c);
void zrangebyscoreCommand(client *c);
void zrevrangebyscoreCommand(client *c);
void zrangebylexCommand(client *c);
void zrevrangebylexCommand(client *c);
void zcountCommand(client *c);
void zlexcountCommand(client *c);
void zrevrangeCommand(client *c);
void zcardCommand(client *c);
void zscoreCommand(client *c);
void zmscoreCommand(client *c);
void zrankCommand(client *c);
void zrevrankCommand(client *c);
void zscanCommand(client *c);
void zpopminCommand(client *c);
void zpopmaxCommand(client *c);
void zmpopCommand(client *c);
void bzpopminCommand(client *c);
void bzpopmaxCommand(client *c);
void bzmpopCommand(client *c);
void zrandmemberCommand(client *c);
void sinterstoreCommand(client *c);
void sunionCommand(client *c);
void sunionstoreCommand(client *c);
void sdiffCommand(client *c);
void sdiffstoreCommand(client *c);
void sscanCommand(client *c);

/* lists (t_list.c) */
void lpushCommand(client *c);
void rpushCommand(client *c);
void lpopCommand(client *c);
void rpopCommand(client *c);
void llenCommand(client *c);
void lrangeCommand(client *c);
void lpushxCommand(client *c);
void rpushxCommand(client *c);
void lindexCommand(client *c);
void lsetCommand(client *c);
void lremCommand(client *c);
void ltrimCommand(client *c);
void linsertCommand(client *c);
void lposCommand(client *c);
void lmoveCommand(client *c);
void rpoplpushCommand(client *c);
void lmpopCommand(client *c);
void blpopCommand(client *c);
void brpopCommand(client *c);
void blmoveCommand(client *c);
void brpoplpushCommand(client *c);
void blmpopCommand(client *c);

/* replay tables: t_replay.h and t_traj.h declare their handlers */

/* transactions (multi.c) */
void multiCommand(client *c);
void execCommand(client *c);
void discardCommand(client *c);
void watchCommand(client *c);
void unwatchCommand(client *c);

/* pub/sub (pubsub.c) */
void subscribeCommand(client *c);
void unsubscribeCommand(client *c);
void psubscribeCommand(client *c);
void punsubscribeCommand(client *c);
void publishCommand(client *c);
void pubsubCommand(client *c);
void ssubscribeCommand(client *c);
void sunsubscribeCommand(client *c);
void spublishCommand(client *c);
/* acl.c */
void aclCommand(client *c);
/* t_stream.c */
void xaddCommand(client *c);
void xrangeCommand(client *c);
void xrevrangeCommand(client *c);
void xlenCommand(client *c);
void xdelCommand(client *c);
void xtrimCommand(client *c);
void xreadCommand(client *c);
void xreadgroupCommand(client *c);
void xgroupCommand(client *c);
void xsetidCommand(client *c);
void xackCommand(client *c);
void xpendingCommand(client *c);
void xclaimCommand(client *c);
void xautoclaimCommand(client *c);
void xinfoCommand(client *c);

#endif
