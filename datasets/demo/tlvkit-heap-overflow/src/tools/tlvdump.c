/* tlvdump FILE: print the records in FILE as an indented tree.
 * Exit status: 0 valid input, 1 malformed input, 2 usage or I/O error. */
#include <stdio.h>
#include <stdlib.h>

#include "tlv.h"

#define MAX_DEPTH 16

static int dump(const uint8_t *buf, size_t len, int depth)
{
    size_t pos = 0;

    if (depth > MAX_DEPTH)
        return TLV_ERR_DEPTH;
    while (pos < len) {
        tlv_item item;
        size_t i;
        int rc = tlv_read_item(buf, len, &pos, &item);

        if (rc != TLV_OK)
            return rc;
        printf("%*stag 0x%02x len %zu", depth * 2, "", item.tag, item.length);
        if (item.tag & TLV_CONSTRUCTED) {
            printf("\n");
            rc = dump(item.value, item.length, depth + 1);
            if (rc != TLV_OK)
                return rc;
            continue;
        }
        printf(":");
        for (i = 0; i < item.length && i < 16; i++)
            printf(" %02x", item.value[i]);
        printf("%s\n", item.length > 16 ? " ..." : "");
    }
    return TLV_OK;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long size;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = malloc(size ? (size_t)size : 1);
    if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)size;
    return buf;
}

int main(int argc, char **argv)
{
    size_t len = 0;
    uint8_t *buf;
    int rc;

    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    buf = read_file(argv[1], &len);
    if (!buf) {
        perror(argv[1]);
        return 2;
    }
    rc = dump(buf, len, 0);
    free(buf);
    if (rc != TLV_OK) {
        fprintf(stderr, "%s: %s\n", argv[1], tlv_strerror(rc));
        return 1;
    }
    return 0;
}
