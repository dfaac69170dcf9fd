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
void infoCommand(client *c);
void shutdownCommand(client *c);
void timeCommand(client *c);

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

/* replay tables (t_replay.c) */
void replayCreateCommand(client *c);
void replayAddCommand(client *c);
void replaySampleCommand(client *c);
void replayUpdateCommand(client *c);
void replayInfoCommand(client *c);
void replayDropCommand(client *c);
void replayListCommand(client *c);
void replayShardsCommand(client *c);

#endif
