/* tlvkit's tests. Every input is copied into a heap buffer of exactly its
 * size, so AddressSanitizer catches any read past the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tlv.h"

static int failures;
static int checks;

#define CHECK(cond)                                                        \
    do {                                                                   \
        checks++;                                                          \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,         \
                    __LINE__, #cond);                                      \
        }                                                                  \
    } while (0)

static uint8_t *heap_copy(const uint8_t *data, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);

    if (!copy) {
        perror("malloc");
        exit(2);
    }
    memcpy(copy, data, len);
    return copy;
}

/* Decode one record from data with tlv_read_item; returns its status. */
static int read_one(const uint8_t *data, size_t len, size_t *pos, tlv_item *item)
{
    uint8_t *buf = heap_copy(data, len);
    int rc = tlv_read_item(buf, len, pos, item);

    if (rc == TLV_OK)
        item->value = data + (item->value - buf); /* point into data, not buf */
    free(buf);
    return rc;
}

static void test_short_form(void)
{
    const uint8_t in[] = {0x04, 0x03, 'a', 'b', 'c'};
    tlv_item item;
    size_t pos = 0;

    CHECK(read_one(in, sizeof in, &pos, &item) == TLV_OK);
    CHECK(item.tag == 0x04);
    CHECK(item.length == 3);
    CHECK(memcmp(item.value, "abc", 3) == 0);
    CHECK(pos == sizeof in);
}

static void test_long_form(void)
{
    uint8_t in[3 + 200];
    tlv_item item;
    size_t pos = 0;

    in[0] = 0x04;
    in[1] = 0x81;
    in[2] = 200;
    memset(in + 3, 'x', 200);
    CHECK(read_one(in, sizeof in, &pos, &item) == TLV_OK);
    CHECK(item.length == 200);
    CHECK(pos == sizeof in);
}

static void test_truncated_value(void)
{
    const uint8_t in[] = {0x04, 0x05, 'a', 'b'};
    tlv_item item;
    size_t pos = 0;

    CHECK(read_one(in, sizeof in, &pos, &item) == TLV_ERR_TRUNCATED);
    CHECK(pos == 0);
}

static void test_bad_lengths(void)
{
    const uint8_t indefinite[] = {0x04, 0x80};
    const uint8_t too_wide[] = {0x04, 0x85, 0, 0, 0, 0, 1};
    const uint8_t not_minimal[] = {0x04, 0x81, 0x05, 1, 2, 3, 4, 5};
    tlv_item item;
    size_t pos = 0;

    CHECK(read_one(indefinite, sizeof indefinite, &pos, &item) == TLV_ERR_LENGTH);
    CHECK(read_one(too_wide, sizeof too_wide, &pos, &item) == TLV_ERR_LENGTH);
    CHECK(read_one(not_minimal, sizeof not_minimal, &pos, &item) == TLV_ERR_LENGTH);
    CHECK(pos == 0);
}

static void test_header_truncated(void)
{
    const uint8_t in[] = {0x04};
    tlv_item item;
    size_t pos = 0;

    CHECK(read_one(in, sizeof in, &pos, &item) == TLV_ERR_TRUNCATED);
    CHECK(read_one(in, 0, &pos, &item) == TLV_ERR_TRUNCATED);
}

static void test_parse_all_and_find(void)
{
    const uint8_t in[] = {0x01, 0x01, 0x07, 0x02, 0x00, 0x30, 0x02, 0x05, 0x00};
    uint8_t *buf = heap_copy(in, sizeof in);
    tlv_item items[4];
    size_t count = 0;
    const tlv_item *found;

    CHECK(tlv_parse_all(buf, sizeof in, items, 4, &count) == TLV_OK);
    CHECK(count == 3);
    found = tlv_find(items, count, 0x30);
    CHECK(found != NULL && found->length == 2);
    CHECK(tlv_find(items, count, 0x99) == NULL);
    CHECK(tlv_parse_all(buf, sizeof in, items, 2, &count) == TLV_ERR_TOO_MANY);
    CHECK(count == 2);
    free(buf);
}

static void test_encode_round_trip(void)
{
    static uint8_t value[300];
    uint8_t out[400];
    size_t sizes[] = {0, 1, 127, 128, 255, 256, 300};
    size_t i;

    memset(value, 'v', sizeof value);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = tlv_encode(0x0c, value, sizes[i], out, sizeof out);
        tlv_item item;
        size_t pos = 0;

        CHECK(n > sizes[i]);
        CHECK(read_one(out, n, &pos, &item) == TLV_OK);
        CHECK(item.tag == 0x0c && item.length == sizes[i] && pos == n);
    }
    CHECK(tlv_encode(0x0c, value, 300, out, 100) == 0);
}

static void test_strerror(void)
{
    CHECK(strcmp(tlv_strerror(TLV_OK), "ok") == 0);
    CHECK(strcmp(tlv_strerror(TLV_ERR_TRUNCATED), "input truncated") == 0);
    CHECK(strcmp(tlv_strerror(12345), "unknown error") == 0);
}

int main(void)
{
    test_short_form();
    test_long_form();
    test_truncated_value();
    test_bad_lengths();
    test_header_truncated();
    test_parse_all_and_find();
    test_encode_round_trip();
    test_strerror();

    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
